"""One candidate, one process: build, then (holding a GPU) check and time it.

Run as `python -m workbench.gpu.worker RESULT_FD` with the job as JSON on stdin. Imports only
torch and the standard library, so it runs under whatever Python holds torch on a GPU box.
The parent (workbench.gpu.pool) launches it sandboxed (workbench.gpu.sandbox), owns timeouts and
kills it on a hang; a crash here costs only this candidate. Results go to a private pipe, tagged with a nonce the candidate
never sees, never to stdout (which carries the candidate's and the compiler's prints).
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


class Channel:
    def __init__(self, fd: int, nonce: str) -> None:
        self._f = os.fdopen(fd, "w", buffering=1)
        self._nonce = nonce

    def send(self, kind: str, **payload) -> None:
        self._f.write(json.dumps({"nonce": self._nonce, "type": kind, **payload}) + "\n")
        self._f.flush()


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def main() -> None:
    from workbench.gpu import confine, observe

    confine.enter()  # the sandbox's inner layers, before anything reads the candidate
    fd = int(sys.argv[1])
    job = json.loads(sys.stdin.read())
    chan = Channel(fd, job.pop("nonce"))
    try:
        verdict = run(job, chan)
    except BaseException as e:  # noqa: BLE001 - anything the candidate does ends as a verdict
        traceback.print_exc()
        verdict = {"status": "crashed", "error": _error_text(e)[:4000]}
    chan.send("result", verdict=observe.annotate(verdict))


def run(job: dict, chan: Channel) -> dict:
    from workbench.gpu import buildhook, candidate_file

    chan.send("phase", phase="compiling")
    recorder = buildhook.BuildRecorder()
    buildhook.install(Path(job["cache_dir"]), recorder)
    candidate_file.triton_cache_default(Path(job["cache_dir"]))
    import torch._dynamo  # noqa: F401 - it rewraps torch functions on import; snapshot after that

    from workbench.gpu import runtime_guards as rg

    watched = rg.watched_objects()
    threads_before = {t.ident for t in threading.enumerate()}
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
    chan.send("phase", phase="compiled", **build)
    if job["mode"] == "compile":
        return {"status": "compiled", **build}

    import_threads = rg.new_threads(threads_before)
    chan.send("phase", phase="preparing")
    from workbench.gpu.evaluate import evaluate, prepare_reference

    reference = prepare_reference(job)
    # Threads the harness started so far (torch.compile's) are not the candidate's.
    threads_before = {t.ident for t in threading.enumerate()}
    chan.send("phase", phase="waiting_gpu")
    with open(job["gpu_lock"], "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
        chan.send("phase", phase="gpu")
        result = evaluate(job, candidate, recorder, reference, watched, threads_before, chan)
    if import_threads:
        result.setdefault("flags", []).append({
            "kind": "threads", "reason": "started threads at import: " + ", ".join(import_threads[:5])})
        if result.get("status") == "correct":
            result["status"] = "flagged"
    return {**build, **result}


if __name__ == "__main__":
    main()
