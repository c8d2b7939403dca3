"""The local executor: one worker process per candidate, queued across this machine's GPUs.

Each candidate runs in its own process, bound to one GPU by CUDA_VISIBLE_DEVICES. Start-up is off the critical path: a warm spare
per GPU (workbench.gpu.spares) has already imported torch and prepared the reference when a
candidate arrives (forked, once it is up, by a fork server that imported torch once:
workbench.gpu.forkserver), its torch.compile a hit in a private copy of the compile cache a clean worker
left (workbench.gpu.reference_cache). Builds queue for CPU slots handed out here, so a build's
time limit does not depend on how many others run, and run in a clean builder process
(workbench.gpu.clean_build), never in the worker that runs the candidate; workers take turns
on each GPU through a lock file, so timings never overlap, and only correctness and timing hold
it. A crash, a hang or an OOM costs only
that worker: the verdict says what happened (workbench.gpu.watchdog owns the limits).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from workbench import cuda_env
from workbench.gpu import (buildlog, clean_build, forkserver, guards, reference_cache,
                           resources, sandbox, watchdog)
from workbench.gpu.executor import EvalRequest, EvalSettings, EvaluationCancelled
from workbench.gpu.spares import Spares
from workbench.gpu.verdict import empty
from workbench.gpu.workers import Worker

CACHE_ENV = "KERNEL_WORKBENCH_CACHE"
MAX_VERIFY_WORKERS = 64
# Builders waiting warm (torch imported, ~520 MB each): up to one per build slot, at most this;
# each one taken is replaced at once (a build finding none starts its own).
MAX_BUILDER_SPARES = 2


def default_cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or
                                             Path.home() / ".cache") / "kernel-workbench"
    return Path(base)


def default_build_slots(cpus: int | None = None) -> int:
    """Builds at once: each is two compile units (MAX_JOBS=2); a core stays for the GPU turns."""
    cpus = cpus or os.cpu_count() or 2
    return max(1, (cpus - 1) // 2)


def default_verify_workers(gpus: int, cpus: int | None = None) -> int:
    """Candidates in flight: enough to keep every build slot busy and, per GPU, one candidate
    on it and one ready behind it."""
    return min(MAX_VERIFY_WORKERS, max(2, default_build_slots(cpus) + 2 * gpus))


class Width:
    """How many candidates are in flight at once; can change while work waits. Waiters go in
    the order they arrived."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, min(MAX_VERIFY_WORKERS, limit))
        self._busy = 0
        self._queue: list[object] = []
        self._cond = threading.Condition()

    def set(self, limit: int) -> None:
        with self._cond:
            self.limit = max(1, min(MAX_VERIFY_WORKERS, limit))
            self._cond.notify_all()

    def __enter__(self) -> None:
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            self._cond.wait_for(lambda: self._queue[0] is ticket and self._busy < self.limit)
            self._queue.pop(0)
            self._busy += 1
            self._cond.notify_all()

    def __exit__(self, *exc) -> None:
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()


class LocalPool:
    """Executor over this machine's GPUs (or none: then builds and static guards only).

    verify_workers: candidates in flight at once (default from cores and GPUs);
    build_slots: builds at once (default from cores); spares: keep warm workers waiting;
    builder: what builds a worker's cache miss (default: the clean builder process);
    fork_server: fork workers from a process that imported torch once (default: with spares,
    unless KERNEL_WORKBENCH_FORK_SERVER=0)."""

    def __init__(self, gpus: list[int] | None = None, verify_workers: int | None = None,
                 cache_dir: Path | None = None, on_phase=None, build_slots: int | None = None,
                 spares: bool = True, builder: watchdog.Builder | None = None,
                 fork_server: bool | None = None) -> None:
        info = cuda_env.list_gpus()
        self.gpus = [g.index for g in info] if gpus is None else list(gpus)
        self.base_env = cuda_env.build_env(info)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._width = Width(verify_workers or default_verify_workers(len(self.gpus)))
        self._threads = ThreadPoolExecutor(max_workers=MAX_VERIFY_WORKERS,
                                           thread_name_prefix="kwb-eval")
        # Workers die with the thread that started them (PR_SET_PDEATHSIG): one long-lived
        # thread starts them all, whichever thread (a spare's watcher, say) asks.
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kwb-launch")
        self._slots = threading.Semaphore(build_slots or default_build_slots())
        self._lock = threading.Lock()
        self._workers: dict[Worker, threading.Event] = {}  # worker -> its candidate's cancel token
        self._tokens: dict[Future, threading.Event] = {}
        self._assigned = {g: 0 for g in self.gpus}
        self._closed = False
        self.spares = Spares(self._launch, enabled=spares)
        self.on_phase = on_phase  # callback(label, phase) for progress displays
        self.builders = clean_build.Builders(
            self.cache_dir, self.base_env, self._launcher,
            spares=min(MAX_BUILDER_SPARES, build_slots or default_build_slots()) if spares else 0)
        self._builder = builder or self.builders.build
        # Workers fork from a process that imported torch once; by default only where spares
        # run (a long-lived pool: for one `eval` its own start would cost what it saves).
        wanted = spares and forkserver.enabled() if fork_server is None else fork_server
        self.forks = forkserver.ForkServer(self.cache_dir, self.base_env) if (
            wanted and sandbox.support().namespaces) else None

    @property
    def verify_workers(self) -> int:
        return self._width.limit

    # -- Executor -----------------------------------------------------------------------
    def submit(self, request: EvalRequest) -> Future:
        """Queue a candidate. A request whose settings name a width (verify_workers) sets the
        pool's width from then on (the app shares one pool between its sessions)."""
        if self._closed:
            raise RuntimeError("the executor is shut down")
        if request.settings.verify_workers:
            self._width.set(request.settings.verify_workers)
        token = threading.Event()
        with self._lock:
            future = self._threads.submit(self._evaluate_in_turn, request, token)
            self._tokens[future] = token
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._tokens.pop(future, None)

    def _evaluate_in_turn(self, request: EvalRequest, token: threading.Event) -> dict:
        with self._width:
            if token.is_set():
                raise EvaluationCancelled(f"{request.label or 'evaluation'}: cancelled")
            return self.evaluate(request, token)

    def cancel(self, futures: list[Future]) -> None:
        """Stop these evaluations; their futures raise CancelledError instead of a verdict."""
        with self._lock:
            tokens = [self._tokens.get(f) for f in futures if not f.cancel()]
            for token in tokens:
                if token is not None:
                    token.set()
            doomed = [w for w, t in self._workers.items() if t.is_set()]
        for worker in doomed:
            worker.kill()

    def prewarm(self, request: EvalRequest) -> None:
        """Start a spare on each GPU for this problem and these settings, before any candidate.
        (Spare builders start with the first build: a session of cache hits needs none.)"""
        for gpu in ([None] if request.settings.no_gpu or not self.gpus else self.gpus):
            job, key = self._job(request, gpu)
            self.spares.ensure(gpu, key, job)

    def shutdown(self, cancel: bool = False) -> None:
        """Stop taking candidates; finish those in flight (or, with cancel, kill them); kill
        the spares."""
        self._closed = True
        if cancel:
            self.spares.close()
            with self._lock:
                for token in self._tokens.values():
                    token.set()
                doomed = list(self._workers)
            for worker in doomed:
                worker.kill()
        self._threads.shutdown(wait=not cancel, cancel_futures=cancel)
        self.spares.close()
        self.builders.close()
        if self.forks is not None:
            self.forks.close()
        self._launcher.shutdown(wait=not cancel)

    # -- one candidate ------------------------------------------------------------------
    def evaluate(self, request: EvalRequest, token: threading.Event | None = None) -> dict:
        s = request.settings
        token = token or threading.Event()
        static_flags, static_notes = guards.review(request.candidate_source, request.dtype)
        gpu = None if (s.no_gpu or not self.gpus) else self._pick_gpu()
        try:
            result = self._run_worker(request, gpu, token)
        finally:
            if gpu is not None:
                with self._lock:
                    self._assigned[gpu] -= 1
        verdict = empty(result.get("status", "crashed"))
        verdict.update({k: v for k, v in result.items() if k != "flags"})
        verdict["flags"] = static_flags + [f for f in result.get("flags", [])
                                           if f["kind"] not in {x["kind"] for x in static_flags}]
        verdict["notes"] = static_notes + list(result.get("notes") or [])
        status = verdict["status"]
        if status == "compiled":
            verdict["status"] = "flagged" if verdict["flags"] else "unverified"
            if gpu is None and not s.no_gpu:
                verdict["error"] = "no GPU on this machine: built and statically checked only"
        elif status in ("correct", "flagged"):
            verdict["status"] = "flagged" if verdict["flags"] else "correct"
        if status != "compile_error" and verdict.get("cache_key"):   # evidence for the prompts
            verdict["resources"] = resources.resource_usage(
                resources.built_objects(self.cache_dir, verdict["cache_key"]))
        verdict["verified"] = verdict["status"] in ("correct", "flagged") and \
            verdict.get("time_ms") is not None
        verdict["atol"], verdict["rtol"] = request.atol, request.rtol
        verdict["reuse_key"] = request.reuse_key()
        return verdict

    def _pick_gpu(self) -> int:
        with self._lock:
            gpu = min(self.gpus, key=lambda g: self._assigned[g])
            self._assigned[gpu] += 1
            return gpu

    def _job(self, request: EvalRequest, gpu: int | None) -> tuple[dict, str]:
        """What a worker needs before its candidate, and the key spares are kept under."""
        job = {
            "mode": "compile" if gpu is None else "full",
            "problem_source": request.problem_source, "atol": request.atol,
            "rtol": request.rtol, "flops": request.flops, "min_bytes": request.min_bytes,
            "dtype": request.dtype, "settings": request.settings.to_dict(),
            "cache_dir": str(self.cache_dir),
            "gpu_lock": str(self.cache_dir / f"gpu{gpu}.lock") if gpu is not None else None,
        }
        return job, hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()

    def _launch(self, job: dict, gpu: int | None, key: str) -> Worker:
        return self._launcher.submit(self._start, job, gpu, key).result()

    def _start(self, job: dict, gpu: int | None, key: str) -> Worker:
        """Start one worker process, sandboxed: the only place one starts. Its sandbox (job
        directory, harvest of its builds) closes with Worker.finish."""
        nonce = secrets.token_hex(16)
        log = tempfile.TemporaryFile(mode="w+", prefix="kwb-worker-")
        sandboxed = ExitStack()
        launch = sandboxed.enter_context(sandbox.worker_launch(self.cache_dir, self.base_env, gpu))
        on_ready = None
        if job["mode"] == "full":
            ref_key = reference_cache.key(job)
            reference_cache.plant(self.cache_dir, ref_key, launch.job_dir)
            on_ready = functools.partial(reference_cache.keep, self.cache_dir, ref_key,
                                         launch.job_dir)
        read_fd, write_fd = os.pipe()
        proc = self._forked(launch, log, write_fd) or subprocess.Popen(
            launch.command(str(write_fd)), stdin=subprocess.PIPE, stdout=log,
            stderr=subprocess.STDOUT, pass_fds=(write_fd,), env=launch.env, cwd=launch.cwd,
            preexec_fn=launch.preexec, start_new_session=True, text=True)
        os.close(write_fd)
        worker = Worker(proc, read_fd, nonce, log, gpu, key, on_finish=sandboxed.close,
                        on_ready=on_ready)
        # Chosen here, in secret: a candidate cannot predict its inputs.
        worker.send({**job, "nonce": nonce,
                     "seeds": [secrets.randbits(31) for _ in range(job["settings"]["trials"] + 2)]})
        return worker

    def _forked(self, launch: sandbox.Launch, log, result_fd: int):
        """A worker forked by the fork server once it is up (it starts with the first worker
        and is waited for by none); None: start this one the plain way."""
        if self.forks is None:
            return None
        self.forks.start()
        if not self.forks.ready():
            return None
        try:
            return self.forks.spawn(launch.env, launch.cwd, log.fileno(), result_fd)
        except OSError:
            return None

    def _ready_to_keep(self, job: dict, worker: Worker, settings: EvalSettings,
                       token: threading.Event) -> None:
        """Without spares (a one-off `eval`) no worker reaches "ready" untouched, so none would
        keep the reference's compile cache: the first of a problem gets its candidate only once
        ready (the cache is kept then). Free for a cached build; a cold build starts after the
        reference is prepared, once per problem and machine. A worker that dies or overruns its
        start-up limit meanwhile is left to the watchdog."""
        if self.spares.enabled or job["mode"] != "full" or \
                reference_cache.kept(self.cache_dir, reference_cache.key(job)):
            return
        end = worker.started + settings.run_timeout_s
        while not worker.ready.wait(0.1):
            if token.is_set() or not worker.alive() or time.monotonic() > end:
                return

    def _run_worker(self, request: EvalRequest, gpu: int | None,
                    token: threading.Event) -> dict:
        job, key = self._job(request, gpu)
        worker = self.spares.take(gpu, key, job)
        with self._lock:
            self._workers[worker] = token
        if token.is_set():  # cancelled while it was handed over
            worker.kill()
        try:
            since = time.monotonic()
            self._ready_to_keep(job, worker, request.settings, token)
            worker.hand_over({"candidate_source": request.candidate_source})
            on_phase = (lambda phase: self.on_phase(request.label, phase)) if self.on_phase else None
            result = watchdog.follow(worker, request.settings, self._slots, token, on_phase,
                                     since, builder=self._builder)
        finally:
            text = worker.finish()
            with self._lock:
                self._workers.pop(worker, None)
        if token.is_set() and result.get("status") in ("crashed", "timeout"):
            # Killed on purpose (Ctrl-C, cancel, quit): no verdict; the kernel is verified again.
            raise EvaluationCancelled(f"{request.label or 'evaluation'}: cancelled")
        result["build_log"] = buildlog.tail(text)
        if result["status"] == "compile_error":
            result["error"] = buildlog.first_errors(result.get("error") or "", text)
        elif result["status"] == "crashed":
            result["error"] = buildlog.crash_reason(result.get("error"), text,
                                                    worker.proc.returncode)
        return result
