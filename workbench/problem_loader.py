"""Problem files are code too: each one is loaded in a child process with a time limit.

An endless loop at import, `sys.exit(0)`, `os._exit` or a crash in a problem file must not hang
or silently end `problems`, `eval`, `run` or the app: the caller gets one line naming the file.

Importing torch costs seconds, so a loader server (`python -m workbench.problem_loader`) imports
it once per process that loads problems and forks a fresh child for each file: the child
executes and describes the problem (workbench.problems.inspect_problem) and sends back the
summary as JSON; the server kills a child still busy at the time limit. The server runs in its
own namespaces where the box allows, and each child confines itself before it runs the file
(no new privileges, Landlock: read the system, Python and the file's folder, write nothing;
seccomp as the workers have it). The server exits when
its parent closes the pipe (or dies); the next load starts a new one.

Protocol: the parent writes one JSON request per line to the server's stdin ({path, source,
smoke, timeout_s}); the server answers one JSON line on its stdout ({problem} or {error}).
Problem files' own prints go to stderr, never into the answer.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

TIMEOUT_ENV = "KERNEL_WORKBENCH_PROBLEM_TIMEOUT"
DEFAULT_TIMEOUT_S = 120.0    # per file, once torch is imported (Swin-size constructors on CPU)
START_TIMEOUT_S = 300.0      # importing torch on a loaded 2-core box


def timeout_s() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S


# -- the parent's side -----------------------------------------------------------------------
class _Server:
    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buffer = b""
        self._lock = threading.Lock()

    def load(self, path: Path, source: str, smoke: bool, limit_s: float) -> dict:
        from workbench.problems import ProblemError

        with self._lock:
            starting = self._proc is None or self._proc.poll() is not None
            if starting:
                self._start()
            request = {"path": str(path), "source": source, "smoke": smoke, "timeout_s": limit_s}
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
                line = self._readline(limit_s + 10 + (START_TIMEOUT_S if starting else 0))
            except (OSError, TimeoutError) as e:
                self._stop()
                raise ProblemError(f"{path}: the problem loader failed ({type(e).__name__}"
                                   f"{': ' + str(e) if str(e) else ''}); try again") from None
            if line is None:
                self._stop()
                raise ProblemError(f"{path}: the problem loader died while loading it "
                                   "(killed from inside the file?)")
        answer = json.loads(line)
        if "error" in answer:
            raise ProblemError(answer["error"])
        return answer["problem"]

    def _start(self) -> None:
        # No keys, no database or verdict-key path; namespaces where this box has them.
        env = {k: v for k, v in os.environ.items()
               if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith("KERNEL_WORKBENCH_")}
        self._proc = subprocess.Popen(
            [*isolation(), sys.executable, "-m", "workbench.problem_loader"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True)
        self._buffer = b""

    def _readline(self, wait_s: float) -> bytes | None:
        deadline = time.monotonic() + wait_s
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._proc = None


_server = _Server()


@functools.cache
def isolation() -> list[str]:
    """The argv prefix that puts the loader in its own user, network, PID and mount namespaces
    with its own /proc (no network; other processes, and their environments, out of sight),
    as the worker sandbox probed them; [] where this box has none."""
    from workbench.gpu import sandbox

    base = sandbox.support().unshare
    if not base:
        return []
    full = [*base[:-1], "--mount", "--mount-proc", "--"]
    try:
        ok = subprocess.run([*full, "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return full if ok else base


def load(path: Path, source: str, smoke: bool) -> dict:
    """The summary of a problem file (inspect_problem's fields), loaded in a child process."""
    return _server.load(path, source, smoke, timeout_s())


# -- the server's side -------------------------------------------------------------------------
def _describe_exit(path: str, status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        return f"{path}: loading it crashed the loader ({sig}); fix the file"
    code = os.WEXITSTATUS(status)
    return (f"{path}: the loader exited (code {code}) while importing it, without describing "
            "the problem (os._exit or exit at import?); a problem file must only define it")


_REFUSED = (" (a problem file may read only the system, Python and its own folder, and write "
            "nothing: keep its data beside it)")


def _confine(path: str) -> None:
    """What a problem file may touch: read the system, Python and its own folder; write
    nothing but /dev/null and the like and the GPU (no database, no cache, no home)."""
    from workbench.gpu import confine, sandbox

    folder = os.path.dirname(os.path.abspath(path))
    package = os.path.dirname(os.path.abspath(__file__))
    # The GPU stays usable for a constructor that needs it (workbench.problems._build_model):
    # its device files, and this process's own /proc entries CUDA writes at initialisation.
    confine.restrict(sandbox.SYSTEM_READ + [folder, package], [f"/proc/{os.getpid()}"],
                     sandbox.DEVICES_RW + sandbox.nvidia_devices())


def _child(request: dict, write_fd: int) -> None:
    from workbench.problems import ProblemError, inspect_problem

    path = request["path"]
    os.dup2(2, 1)            # the file's prints go to stderr, never into an answer
    try:
        _confine(path)
        problem = inspect_problem(Path(path), request["source"], request["smoke"])
        fields = dataclasses.asdict(problem)
        fields.pop("source"), fields.pop("path")
        answer = {"problem": fields}
    except ProblemError as e:
        answer = {"error": str(e) + (_REFUSED if "PermissionError" in str(e) else "")}
    except SystemExit as e:
        answer = {"error": f"{path}: calls sys.exit({e.code!r}) at import; a problem file must "
                           "only define the problem"}
    except BaseException as e:  # noqa: BLE001 - anything the file does ends as one line
        answer = {"error": f"{path}: loading failed: {type(e).__name__}: "
                           f"{' '.join(str(e).split())}"[:500]}
    data = (json.dumps(answer) + "\n").encode()
    while data:
        data = data[os.write(write_fd, data):]
    os._exit(0)


def _serve_one(request: dict) -> dict:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(request, write_fd)
        finally:
            os._exit(1)
    os.close(write_fd)
    deadline = time.monotonic() + request["timeout_s"]
    data, timed_out = b"", False
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([read_fd], [], [], max(0.0, left))
        if not ready:
            timed_out = True
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(read_fd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"error": f"{request['path']}: still loading after {request['timeout_s']:g} s "
                         f"(an endless loop at import?); stopped it (limit: {TIMEOUT_ENV})"}
    if data.endswith(b"\n"):
        return json.loads(data)
    return {"error": _describe_exit(request["path"], status)}


_WARM_UP = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x):
        return torch.softmax(self.linear(x).relu(), dim=1)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
'''


def main() -> None:
    # Once, before any fork, so every child starts warm: torch's first meta-device pass and
    # FLOP count cost ~2 s of lazy set-up, the next ones milliseconds. Shapes only, no CPU
    # compute: a fork after torch's OpenMP pool has started can deadlock the child.
    from workbench.problems import inspect_problem

    inspect_problem(Path("<warm-up>"), _WARM_UP, smoke=False)

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)    # stray prints of this process never reach the answer channel
    for line in sys.stdin.buffer:
        answer = _serve_one(json.loads(line))
        out.write((json.dumps(answer) + "\n").encode())
        out.flush()


if __name__ == "__main__":
    main()
