"""One candidate, one process: warm up, build, then (holding a GPU) check and time it.

Run as `python -m workbench.gpu.worker RESULT_FD`. Imports only torch and the standard library,
so it runs under whatever Python holds torch on a GPU box. The parent (workbench.gpu.pool)
starts it as a spare: it reads the job (everything but the candidate) as one JSON line on stdin,
imports torch, creates its CUDA context and prepares the reference (eager and torch.compile),
says "ready", and only then reads the candidate's line. It evaluates exactly that one candidate
and exits. Later stdin lines are the parent's replies to build requests.

The parent launches it sandboxed (workbench.gpu.sandbox), owns every time limit and kills it on
a hang; a crash here costs only this candidate. Results go to a private pipe, tagged with a nonce the candidate never
sees, never to stdout (which carries the candidate's and the compiler's prints).
"""
from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

SIMULATED_ENV = "KERNEL_WORKBENCH_SIMULATED_GPU"  # tests: the GPU turn runs on the CPU
_clock = time.monotonic  # taken before any candidate code can replace it


class Channel:
    """Messages to the parent (results pipe) and its grants (the private copy of stdin)."""

    def __init__(self, fd: int, nonce: str, control) -> None:
        self._f = os.fdopen(fd, "w", buffering=1)
        self._nonce = nonce
        self._control = control
        self._last_beat = 0.0

    def send(self, kind: str, **payload) -> None:
        self._f.write(json.dumps({"nonce": self._nonce, "type": kind, **payload}) + "\n")
        self._f.flush()

    def phase(self, phase: str, **payload) -> None:
        self.send("phase", phase=phase, **payload)

    def beat(self, allow_s: float | None = None) -> None:
        """Before each call on the GPU: tells the parent's watchdog the turn is alive (at most
        five times a second). `allow_s` asks for longer before the next one (e.g. profiler set-up)."""
        now = _clock()
        if allow_s is not None or now - self._last_beat >= 0.2:
            self._last_beat = now
            self.send("beat", **({"allow_s": allow_s} if allow_s is not None else {}))

    def receive(self) -> dict | None:
        line = self._control.readline()
        return json.loads(line) if line.strip() else None


class BuildGate:
    """A miss goes to the parent: it queues the build for a CPU slot (the wait does not count
    against the build's time limit) and builds it in a clean process that runs no candidate
    code; the build lands in the shared cache under the key the parent computed."""

    def __init__(self, chan: Channel) -> None:
        self._chan = chan

    def build(self, spec: dict) -> tuple[str, float]:
        """The key the build is cached under, and the build's own seconds (not the queue's)."""
        self._chan.phase("build_queue", spec=spec)
        reply = self._chan.receive()
        self._chan.phase("built")
        if not reply:
            raise RuntimeError("the verifier withdrew this build")
        if "key" not in reply:
            raise RuntimeError(str(reply.get("error") or "the build failed"))
        return str(reply["key"]), float(reply.get("seconds") or 0.0)


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def main(fd: int | None = None) -> None:
    """`fd`: the result pipe (default: the command line's; the fork server passes it)."""
    from workbench.gpu import confine, observe

    confine.enter()  # the sandbox's inner layers, before anything reads the candidate
    fd = int(sys.argv[1]) if fd is None else fd
    # The parent's control lines stay private: the candidate's stdin is /dev/null.
    control = os.fdopen(os.dup(0), "r")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    job = json.loads(control.readline())
    chan = Channel(fd, job.pop("nonce"), control)
    try:
        verdict = run(job, chan)
    except BaseException as e:  # noqa: BLE001 - anything the candidate does ends as a verdict
        traceback.print_exc()
        verdict = {"status": "crashed", "error": _error_text(e)[:4000]}
    if verdict is not None:
        chan.send("result", verdict=observe.annotate(verdict))


def _evaluator():
    if os.environ.get(SIMULATED_ENV):
        from workbench.gpu import simulated
        return simulated
    from workbench.gpu import evaluate
    return evaluate


def run(job: dict, chan: Channel) -> dict | None:
    from workbench.gpu import buildhook, candidate_file

    chan.phase("starting")
    recorder = buildhook.BuildRecorder()
    buildhook.install(Path(job["cache_dir"]), recorder, gate=BuildGate(chan))
    candidate_file.triton_cache_default(Path(job["cache_dir"]))
    import torch._dynamo  # noqa: F401 - it rewraps torch functions on import; snapshot after that

    from workbench.gpu import runtime_guards as rg

    reference, evaluator = None, None
    if job["mode"] == "full":
        chan.phase("preparing")
        evaluator = _evaluator()
        reference = evaluator.prepare_reference(job)
    chan.phase("ready", ref_eager_ms=getattr(reference, "eager_ms", None))
    candidate_job = chan.receive()
    if candidate_job is None:
        return None  # a spare nobody took: the pool is closing
    job.update(candidate_job)

    watched = rg.watched_objects()
    threads_before = {t.ident for t in threading.enumerate()}
    chan.phase("compiling")
    t0 = time.perf_counter()
    candidate, error = None, None
    try:
        candidate = candidate_file.import_source(job["candidate_source"])
    except BaseException as e:  # noqa: BLE001
        error = _error_text(e)
    # A failed build never reaches the recorder's clock: report the time spent trying.
    build = {"compile_s": recorder.seconds if recorder.extensions and not error
             else time.perf_counter() - t0,
             "cache_hit": bool(recorder.extensions) and recorder.cache_hit and not error,
             "extensions": recorder.extensions, "cache_key": ",".join(recorder.keys)}
    if error:
        return {"status": "compile_error", "error": error, **build}
    if not hasattr(candidate, "ModelNew"):
        return {"status": "compile_error", **build,
                "error": "the candidate defines no `ModelNew` class"}
    chan.phase("compiled", **build)
    if job["mode"] == "compile":
        return {"status": "compiled", **build}

    import_threads = rg.new_threads(threads_before)
    # Threads the harness started so far (torch.compile's) are not the candidate's.
    threads_before = {t.ident for t in threading.enumerate()}
    chan.phase("waiting_gpu")
    with open(job["gpu_lock"], "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
        chan.phase("gpu")
        result = evaluator.evaluate(job, candidate, recorder, reference, watched, threads_before,
                                    chan)
    if import_threads:
        result.setdefault("flags", []).append({
            "kind": "threads", "reason": "started threads at import: " + ", ".join(import_threads[:5])})
        if result.get("status") == "correct":
            result["status"] = "flagged"
    return {**build, **result}


if __name__ == "__main__":
    main()
