"""The parent's side of the fork server (workbench.gpu.zygote): start it, ask it for workers.

One fork server per pool imports torch once; each worker forked from it skips the interpreter's
start and the imports (most of a worker's start-up) and still gets a sandbox of its own. The
server starts in the background: until it says "ready" (and wherever it cannot run: no
namespaces or no nesting, CUDA initialised while importing torch, KERNEL_WORKBENCH_FORK_SERVER=0)
workers start the plain way.
`ForkedProcess` stands in for the subprocess.Popen of a worker started the plain way.
"""
from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path

from workbench.gpu import sandbox

DISABLE_ENV = "KERNEL_WORKBENCH_FORK_SERVER"   # "0": every worker starts the plain way


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "1").lower() not in ("0", "false", "no", "off")


def check() -> tuple[bool, str]:
    """(usable, detail) for `doctor`: the switch, the sandbox's namespaces, and whether this
    kernel lets a worker nest namespaces of its own inside them (torch is not imported)."""
    if not enabled():
        return True, f"off ({DISABLE_ENV}=0): every worker starts as a new process"
    s = sandbox.support()
    if not s.namespaces:
        return False, "needs the sandbox's namespaces: every worker starts as a new process"
    code = "from workbench.gpu import zygote; zygote.probe_namespaces()"
    env = {**os.environ, "PYTHONPATH": sandbox.package_root()}
    try:
        out = subprocess.run([*s.unshare, sys.executable, "-c", code], capture_output=True,
                             text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"probe failed: {e}"
    if out.returncode:
        return False, (out.stdout.strip() or out.stderr.strip()[-200:] or "probe failed") + \
            ": every worker starts as a new process"
    return True, "workers fork from one process that imported torch (nested namespaces work)"


class ForkedProcess:
    """A worker forked by the fork server, as far as the pool uses a Popen: stdin, poll, wait,
    returncode, kill (the whole sandbox: its namespace dies with it)."""

    def __init__(self, server: "ForkServer", ident: int, stdin_fd: int) -> None:
        self._server, self.id = server, ident
        self.stdin = os.fdopen(stdin_fd, "w")
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired("forked worker", timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self._server.kill(self.id)


class ForkServer:
    def __init__(self, cache_dir: Path, base_env: dict[str, str]) -> None:
        self.cache_dir, self.base_env = cache_dir, base_env
        self.state = "off"        # off -> starting -> ready | unavailable | gone
        self.reason = ""
        self.preload_s: float | None = None
        self._ids = itertools.count(1)
        self._children: dict[int, ForkedProcess] = {}
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None   # its stdout and stderr: the reason when it exits early
        self._sandbox = ExitStack()
        self._ready = threading.Event()
        self.job_dir: Path | None = None   # its own directory (HOME, TMPDIR) while it runs

    def start(self) -> None:
        """Launch it (from the thread that launches workers: it dies with that thread)."""
        if self.state != "off":
            return
        self.state = "starting"
        try:
            launch = self._sandbox.enter_context(
                sandbox.worker_launch(self.cache_dir, self.base_env, None, confined=False))
        except sandbox.SandboxError as e:
            self._give_up(str(e))
            return
        self.job_dir = launch.job_dir
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = tempfile.TemporaryFile(prefix="kwb-forkserver-")
        self._proc = subprocess.Popen(
            [*launch.argv, *launch.command_of("workbench.gpu.zygote", str(theirs.fileno()))],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(theirs.fileno(),), env=launch.env, cwd=launch.cwd,
            preexec_fn=launch.preexec, start_new_session=True)
        theirs.close()
        self._sock, self._log = ours, log
        threading.Thread(target=self._read, daemon=True, name="kwb-forkserver").start()

    def ready(self) -> bool:
        return self.state == "ready"

    def wait_ready(self, timeout: float) -> bool:
        self._ready.wait(timeout)
        return self.ready()

    def spawn(self, env: dict[str, str], cwd: str, log_fd: int, result_fd: int) -> ForkedProcess:
        """A worker with this environment and directory; its stdout and stderr go to log_fd and
        its results to result_fd (the parent keeps its own copies of neither)."""
        stdin_r, stdin_w = os.pipe()
        with self._lock:
            ident = next(self._ids)
            child = self._children[ident] = ForkedProcess(self, ident, stdin_w)
        try:
            socket.send_fds(self._sock, [json.dumps({"op": "spawn", "id": ident, "env": env,
                                                     "cwd": cwd}).encode()],
                            [stdin_r, log_fd, result_fd])
        except OSError as e:
            with self._lock:
                self._children.pop(ident, None)
            child.stdin.close()
            raise OSError(f"the fork server is gone: {e}") from e
        finally:
            os.close(stdin_r)
        return child

    def kill(self, ident: int) -> None:
        try:
            self._sock.send(json.dumps({"op": "kill", "id": ident}).encode())
        except OSError:
            pass  # the server is gone, and with it every worker it forked

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            if msg["op"] == "ready":
                self.preload_s, self.state = msg.get("preload_s"), "ready"
                self._ready.set()
            elif msg["op"] == "unavailable":
                self._give_up(msg.get("reason", ""))
            elif msg["op"] == "exit":
                with self._lock:
                    child = self._children.pop(msg["id"], None)
                if child:
                    child._exit(int(msg["code"]))
        if self.state in ("starting", "ready"):
            self._give_up("the fork server exited: " + self._log_tail())
        with self._lock:  # it took its workers with it (their parent died)
            orphans, self._children = list(self._children.values()), {}
        for child in orphans:
            child._exit(-9)

    def _give_up(self, reason: str) -> None:
        self.state = "unavailable" if self.state == "starting" else "gone"
        self.reason = reason
        self._ready.set()

    def _log_tail(self) -> str:
        try:
            self._log.seek(0)
            return self._log.read().decode(errors="replace").strip().splitlines()[-1][:300]
        except (OSError, ValueError, IndexError):
            return "no output"

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.wait()
        if self._sock is not None:
            self._sock.close()
        self._sandbox.close()
        if self.state in ("starting", "ready"):
            self.state = "gone"
        self._ready.set()
