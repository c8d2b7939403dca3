"""A worker process as the parent sees it: its control line, its message stream, its log."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time


class Worker:
    """One started worker (see workbench.gpu.worker): first a spare, then one candidate's."""

    def __init__(self, proc: subprocess.Popen, read_fd: int, nonce: str, log, gpu: int | None,
                 key: str, on_finish=None, on_ready=None) -> None:
        self.proc, self.nonce, self.log, self.gpu, self.key = proc, nonce, log, gpu, key
        self._on_finish = on_finish  # after it is reaped (the sandbox removes its job directory)
        # When it is ready and no candidate was handed over yet: nothing but trusted code has
        # run in it (workbench.gpu.reference_cache keeps its compile cache then).
        self._on_ready = on_ready
        self._handover = threading.Lock()
        self.taken = False
        self.started = time.monotonic()
        self._finishing = threading.Lock()
        self.ready = threading.Event()  # it said "ready": torch, CUDA and the reference are up
        self.ready_at: float | None = None
        # (arrival time, line); None at the end of the stream
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(read_fd,), daemon=True,
                         name="kwb-reader").start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd) as f:
            for line in f:
                if '"ready"' in line and not self.ready.is_set():
                    self.ready_at = time.monotonic()
                    with self._handover:
                        if self._on_ready and not self.taken:
                            self._on_ready()
                    self.ready.set()
                self.messages.put((time.monotonic(), line))
        self.messages.put((time.monotonic(), None))

    def send(self, message: dict) -> bool:
        """One control line to the worker; False when it is gone."""
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def hand_over(self, message: dict) -> bool:
        """Send the candidate's line: from here on the worker runs untrusted code."""
        with self._handover:
            self.taken = True
            return self.send(message)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        kill(self.proc)

    def finish(self) -> str:
        """Kill it (whatever it was doing), reap it, and return what it printed (once)."""
        with self._finishing:
            if self.log.closed:
                return ""
            return self._finish()

    def _finish(self) -> str:
        kill(self.proc)
        self.proc.wait()
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        if self._on_finish:
            self._on_finish()
        self.log.seek(0)
        text = self.log.read()
        self.log.close()
        return text


def kill(proc) -> None:
    """Kill a worker with everything it started: its process group, or (forked by the fork
    server, workbench.gpu.forkserver) its namespace."""
    if not isinstance(proc, subprocess.Popen):
        proc.kill()
        return
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
