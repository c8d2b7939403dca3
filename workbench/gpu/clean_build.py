"""The parent's side of a build: a worker that misses the cache sends its load_inline arguments;
this computes their key itself, builds them in a fresh sandboxed builder process that runs no
candidate code (workbench.gpu.builder) and copies the result into the shared cache under that
key. Nothing the worker could have forged (a key, a file in its build folder) reaches the cache:
a candidate can only ever cause the build of its own arguments, stored under their own key.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import Executor
from contextlib import ExitStack
from pathlib import Path

from workbench.gpu import buildhook, sandbox
from workbench.gpu.builder import TAG
from workbench.gpu.workers import kill

POLL_S = 0.25
ERROR_LIMIT = 20000  # torch's message holds the whole compiler output; the first errors lead


class BuildTimeout(Exception):
    """The build ran past its time limit; the builder was killed."""


class BuildCancelled(Exception):
    """The pool is closing or the candidate was cancelled; the builder was killed."""


def valid_spec(spec: object) -> bool:
    """A spec as buildhook.spec_of makes it; anything else is refused before a process starts."""
    if not isinstance(spec, dict) or not isinstance(spec.get("record"), dict):
        return False
    record = spec["record"]
    lists = ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags",
             "extra_ldflags", "extra_include_paths")
    return (isinstance(record.get("name"), str) and isinstance(spec.get("toolchain"), str)
            and all(isinstance(record.get(k), list) and all(isinstance(x, str) for x in record[k])
                    for k in lists)
            and (spec.get("fn_map") is None or (isinstance(spec["fn_map"], dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in spec["fn_map"].items())))
            and isinstance(spec.get("error_handling"), bool)
            and isinstance(spec.get("with_cuda"), bool))


class _Builder:
    """One builder process and its sandbox (job directory, harvest of its one key)."""

    def __init__(self, cache_dir: Path, base_env: dict[str, str]) -> None:
        self._stack = ExitStack()
        self.launch = self._stack.enter_context(sandbox.worker_launch(cache_dir, base_env, None))
        try:
            self.proc = subprocess.Popen(
                [*self.launch.argv, sys.executable, "-m", "workbench.gpu.builder"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=self.launch.env, cwd=self.launch.cwd, preexec_fn=self.launch.preexec,
                start_new_session=True, text=True)
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        """Kill it if it still runs, then harvest its key and remove its job directory."""
        kill(self.proc)
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass  # a request it never read
        self._stack.close()


class Builders:
    """Builds cache misses, one fresh builder process per build. With `spares`, that many
    builders wait ahead (in their sandbox, torch imported: seconds of start-up off each build's
    critical path), started from `launcher`, a thread that outlives them (a builder dies with
    the thread that started it)."""

    def __init__(self, cache_dir: Path, base_env: dict[str, str], launcher: Executor,
                 spares: int = 0) -> None:
        self.cache_dir, self.base_env = cache_dir, base_env
        self._launcher, self._spares = launcher, spares
        self._lock = threading.Lock()
        self._waiting: list[_Builder] = []
        self._closed = False

    def build(self, spec: dict, timeout_s: float, cancelled: threading.Event) -> str:
        """Build `spec` unless the cache holds it; return its key. Raises RuntimeError with the
        compiler's message on a failed build, BuildTimeout or BuildCancelled."""
        if not valid_spec(spec):
            raise RuntimeError("the build request is malformed")
        key = buildhook.build_key(spec)
        if buildhook.cached(self.cache_dir, spec, key):
            return key  # another worker's build of the same arguments landed meanwhile
        builder = self._take()
        try:
            builder.launch.builds.add(key)  # the only key harvested from this builder
            output = _wait(builder.proc, json.dumps({"spec": spec, "key": key}) + "\n",
                           timeout_s, cancelled)
        finally:
            builder.close()
        answer = _answer(output)
        if answer.get("ok") and buildhook.cached(self.cache_dir, spec, key):
            return key
        error = answer.get("error") or ("the build produced no extension: " +
                                        (output.strip().splitlines() or ["no output"])[-1][:500])
        raise RuntimeError(str(error)[:ERROR_LIMIT])

    def _take(self) -> _Builder:
        with self._lock:
            if self._closed:
                raise BuildCancelled()
            spare = self._waiting.pop(0) if self._waiting else None
        if spare is not None and spare.proc.poll() is not None:
            spare.close()  # died while it waited: its log is gone with it; start afresh
            spare = None
        builder = spare or self._launcher.submit(_Builder, self.cache_dir, self.base_env).result()
        self.ensure()
        return builder

    def ensure(self) -> None:
        """Start the spares now (in the background), before the first build asks."""
        if self._spares:
            self._launcher.submit(self._refill)

    def waiting(self) -> list[subprocess.Popen]:
        with self._lock:
            return [b.proc for b in self._waiting]

    def _refill(self) -> None:
        while True:
            with self._lock:
                if self._closed or len(self._waiting) >= self._spares:
                    return
            try:
                builder = _Builder(self.cache_dir, self.base_env)
            except Exception:  # noqa: BLE001 - a spare is a head start; the build starts its own
                return
            with self._lock:
                keep = not self._closed
                if keep:
                    self._waiting.append(builder)
            if not keep:
                builder.close()
                return

    def close(self) -> None:
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
        for builder in waiting:
            builder.close()


def _wait(proc: subprocess.Popen, request: str, timeout_s: float,
          cancelled: threading.Event) -> str:
    end = time.monotonic() + max(0.0, timeout_s)
    pending: str | None = request
    while True:
        try:
            output, _ = proc.communicate(pending, timeout=POLL_S)
            return output or ""
        except subprocess.TimeoutExpired:
            pending = None  # already written
        if cancelled.is_set() or time.monotonic() >= end:
            kill(proc)
            proc.communicate()
            raise BuildCancelled() if cancelled.is_set() else BuildTimeout()


def _answer(output: str) -> dict:
    """The builder's tagged answer: its last line that parses as one (the compiler prints too)."""
    for line in reversed(output.splitlines()):
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(msg, dict) and msg.get(TAG):
            return msg
    return {}

