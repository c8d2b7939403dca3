"""One driver per session: an flock on a lock file next to the database.

Two processes driving one session double its LLM calls and kernels, so whoever drives a session
(`run`, `run --resume`, the app's engine) holds `<db>.locks/session-<id>.lock`. The kernel drops
an flock when its holder dies, however it dies, so a dead driver's lock is free to take: there
is no stale state to clean up. Within one process the lock is re-entrant (the app's engines
and `run` take it more than once); it is released when the last holder releases it.
"""
from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from pathlib import Path


class SessionLocked(Exception):
    """Another process drives the session; str() is one line saying which and what to do."""


_held: dict[Path, list] = {}        # lock file -> [open file, holders in this process]
_guard = threading.Lock()


def lock_path(db_path: str | Path, session_id: int) -> Path:
    db = Path(db_path)
    return db.with_name(db.name + ".locks") / f"session-{session_id}.lock"


def _holder(path: Path) -> str:
    """Who holds the lock, as its holder wrote it (pid, command, since when)."""
    try:
        info = json.loads(path.read_text() or "{}")
        return (f"pid {info['pid']}: {info['command']}, since "
                f"{time.strftime('%H:%M:%S', time.localtime(info['since']))}")
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said which yet"


def acquire(db_path: str | Path, session_id: int) -> Path:
    """Take the session's lock or raise SessionLocked; returns the lock file for `release`."""
    path = lock_path(db_path, session_id).resolve()
    with _guard:
        if path in _held:
            _held[path][1] += 1
            return path
        try:
            path.parent.mkdir(exist_ok=True)
            f = open(path, "a+")
        except OSError as e:
            raise SessionLocked(f"session {session_id}: cannot create its lock file {path}: "
                                f"{e.strerror or e}") from None
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise SessionLocked(
                f"session {session_id} is being driven by another process ({_holder(path)}); "
                "stop it there (Ctrl-C or the app's stop) or wait for it, then resume") from None
        f.truncate(0)
        f.write(json.dumps({"pid": os.getpid(), "since": time.time(),
                            "command": " ".join(["kernel-workbench"] + sys.argv[1:])[:120]}))
        f.flush()
        _held[path] = [f, 1]
        return path


def release(path: Path) -> None:
    """Give back one hold on the lock; the last one unlocks it."""
    with _guard:
        entry = _held.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _held[path]
            entry[0].truncate(0)
            entry[0].close()     # closing the file drops the flock
