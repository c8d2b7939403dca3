"""The local executor: one worker process per candidate, a queue across this machine's GPUs.

Each candidate builds and runs in its own process (its own session, so nvcc and ninja die with
it), bound to one GPU by CUDA_VISIBLE_DEVICES. Workers build in parallel and take turns on each
GPU through a lock file, so timings never overlap. A crash, a hang or an OOM costs only that
worker: the verdict says what happened and the next candidate starts fresh.
"""
from __future__ import annotations

import json
import os
import queue
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from workbench import cuda_env
from workbench.gpu import buildlog, guards, resources, sandbox
from workbench.gpu.executor import EvalRequest, EvaluationCancelled
from workbench.gpu.verdict import empty

CACHE_ENV = "KERNEL_WORKBENCH_CACHE"


def default_cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or
                                             Path.home() / ".cache") / "kernel-workbench"
    return Path(base)


class LocalPool:
    """Executor over this machine's GPUs (or none: then builds and static guards only)."""

    def __init__(self, gpus: list[int] | None = None, compile_workers: int | None = None,
                 cache_dir: Path | None = None, on_phase=None) -> None:
        info = cuda_env.list_gpus()
        self.gpus = [g.index for g in info] if gpus is None else list(gpus)
        self.base_env = cuda_env.build_env(info)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        workers = compile_workers or max(2, (os.cpu_count() or 2) // 2)
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kwb-eval")
        self._lock = threading.Lock()
        self._procs: dict[subprocess.Popen, threading.Event] = {}   # worker -> its cancel token
        self._tokens: dict[Future, threading.Event] = {}
        self._assigned = {g: 0 for g in self.gpus}
        self._closed = False
        self.on_phase = on_phase  # callback(label, phase) for progress displays

    # -- Executor -----------------------------------------------------------------------
    def submit(self, request: EvalRequest) -> Future:
        if self._closed:
            raise RuntimeError("the executor is shut down")
        token = threading.Event()
        with self._lock:
            future = self._threads.submit(self.evaluate, request, token)
            self._tokens[future] = token
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._tokens.pop(future, None)

    def cancel(self, futures: list[Future]) -> None:
        """Stop these evaluations; their futures raise CancelledError instead of a verdict."""
        with self._lock:
            tokens = [self._tokens.get(f) for f in futures if not f.cancel()]
            for token in tokens:
                if token is not None:
                    token.set()
            doomed = [p for p, t in self._procs.items() if t.is_set()]
        for proc in doomed:
            _kill(proc)

    def shutdown(self, cancel: bool = False) -> None:
        self._closed = True
        if cancel:
            with self._lock:
                for token in self._tokens.values():
                    token.set()
                doomed = list(self._procs)
            for proc in doomed:
                _kill(proc)
        self._threads.shutdown(wait=not cancel, cancel_futures=cancel)

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
        verdict.update({k: v for k, v in result.items() if k not in ("flags", "notes")})
        verdict["notes"] = static_notes + result.get("notes", [])
        verdict["flags"] = static_flags + [f for f in result.get("flags", [])
                                           if f["kind"] not in {x["kind"] for x in static_flags}]
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
        return verdict

    def _pick_gpu(self) -> int:
        with self._lock:
            gpu = min(self.gpus, key=lambda g: self._assigned[g])
            self._assigned[gpu] += 1
            return gpu

    def _run_worker(self, request: EvalRequest, gpu: int | None,
                    token: threading.Event) -> dict:
        s = request.settings
        nonce = secrets.token_hex(16)
        job = {
            "nonce": nonce, "mode": "compile" if gpu is None else "full",
            "problem_source": request.problem_source, "candidate_source": request.candidate_source,
            "atol": request.atol, "rtol": request.rtol, "flops": request.flops,
            "min_bytes": request.min_bytes, "dtype": request.dtype, "settings": s.to_dict(),
            "cache_dir": str(self.cache_dir),
            "gpu_lock": str(self.cache_dir / f"gpu{gpu}.lock") if gpu is not None else None,
            # Chosen here, in secret: a candidate cannot predict its inputs.
            "seeds": [secrets.randbits(31) for _ in range(s.trials + 2)],
        }
        log = tempfile.TemporaryFile(mode="w+", prefix="kwb-worker-")
        with sandbox.worker_launch(self.cache_dir, self.base_env, gpu) as launch:
            read_fd, write_fd = os.pipe()
            proc = subprocess.Popen(
                launch.command(str(write_fd)), stdin=subprocess.PIPE, stdout=log,
                stderr=subprocess.STDOUT, pass_fds=(write_fd,), env=launch.env, cwd=launch.cwd,
                preexec_fn=launch.preexec, start_new_session=True, text=True)
            os.close(write_fd)
            with self._lock:
                self._procs[proc] = token
            try:
                if token.is_set():   # cancelled while the worker started
                    _kill(proc)
                proc.stdin.write(json.dumps(job))
                proc.stdin.close()
                result = self._follow(proc, read_fd, nonce, request)
            except BrokenPipeError:   # killed before it read its job
                os.close(read_fd)
                result = {"status": "crashed", "error": None}
            finally:
                _kill(proc)
                proc.wait()
                with self._lock:
                    self._procs.pop(proc, None)
        if token.is_set() and result.get("status") in ("crashed", "timeout"):
            # Killed on purpose (Ctrl-C, cancel, quit): no verdict; the kernel is verified again.
            log.close()
            raise EvaluationCancelled(f"{request.label or 'evaluation'}: cancelled")
        log.seek(0)
        text = log.read()
        log.close()
        result["build_log"] = buildlog.tail(text)
        if result["status"] == "compile_error":
            result["error"] = buildlog.first_errors(result.get("error") or "", text)
        elif result["status"] == "crashed":
            result["error"] = buildlog.crash_reason(result.get("error"), text, proc.returncode)
        return result

    def _follow(self, proc: subprocess.Popen, read_fd: int, nonce: str,
                request: EvalRequest) -> dict:
        """Read the worker's messages; enforce each phase's time limit."""
        s = request.settings
        messages: queue.Queue = queue.Queue()

        def reader() -> None:
            with os.fdopen(read_fd) as f:
                for line in f:
                    messages.put(line)
            messages.put(None)

        threading.Thread(target=reader, daemon=True, name="kwb-reader").start()
        phase, deadline = "compiling", time.monotonic() + s.compile_timeout_s
        compiled: dict = {}
        forged = False
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                line = messages.get(timeout=timeout)
            except queue.Empty:
                _kill(proc)
                limit = s.compile_timeout_s if phase == "compiling" else s.run_timeout_s
                return {**compiled, "status": "timeout",
                        "error": f"{phase} took longer than {limit:.0f} s; the worker was killed"}
            if line is None:
                proc.wait()
                return {**compiled, "status": "crashed", "error": None}
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                forged = True
                continue
            if msg.get("nonce") != nonce:
                forged = True
                continue
            if msg["type"] == "result":
                result = msg["verdict"]
                if forged:
                    result.setdefault("flags", []).append({
                        "kind": "forged_result",
                        "reason": "something other than the evaluator wrote to its result channel"})
                return result
            phase = msg.get("phase", phase)
            if self.on_phase:
                self.on_phase(request.label, phase)
            if phase == "compiled":
                compiled = {k: msg[k] for k in ("compile_s", "cache_hit", "extensions",
                                                "cache_key") if k in msg}
                deadline = None
            elif phase == "preparing":
                deadline = time.monotonic() + s.run_timeout_s
            elif phase == "waiting_gpu":
                deadline = None
            elif phase == "gpu":
                deadline = time.monotonic() + s.run_timeout_s


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
