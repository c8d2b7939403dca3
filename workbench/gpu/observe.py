"""Inside the sandboxed worker: note what the candidate tried that the sandbox refuses, so the
verdict says what was blocked rather than showing a bare PermissionError. Standard library only.

An audit hook (PEP 578; it cannot be removed once added) sees each open, connect, bind and shell
command and checks it against the same allow lists the Landlock rules were built from. Only what
the candidate's own code asked for counts (a frame of a file in the job directory, where the
candidate is imported from, on the stack): the harness's and torch's own probes are not the
candidate's doing. The kernel does the refusing; this only names it. Code that goes around
Python (ctypes, a child process) is still refused, just not named here.
"""
from __future__ import annotations

import os
import re
import sys
import threading

LIMIT = 12
# The events worth a look. Every other one (two million while torch imports, most of them
# `object.__getattr__` from walking frames) must cost one set lookup: the hook runs for every
# event until the worker exits, through the reference's compile and the timed calls too.
WATCHED = frozenset({"open", "socket.connect", "socket.bind", "os.system", "os.fork",
                     "os.forkpty"})
_PROC_OTHER = re.compile(r"^/proc/(\d+)/")
_seen: list[str] = []
_busy = threading.local()


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _note(text: str) -> None:
    if text not in _seen and len(_seen) < LIMIT:
        _seen.append(text)


def _from(origin: tuple[str, ...], generated: tuple[str, ...]) -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(origin) and not name.startswith(generated):
            return True
        frame = frame.f_back
    return False


def _prefixes(paths: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(q for p in paths for q in (p.rstrip("/") + "/",
                                                          os.path.realpath(p) + "/")))


def install(read: list[str], write: list[str], origin: str,
            generated: list[str] | None = None) -> None:
    """Watch for what `read`/`write` do not allow, asked for by code from files under `origin`.
    Code under `generated` (inductor's and Triton's output for the reference's torch.compile,
    which live in the job directory too) is the harness's, not the candidate's: a reference
    compiled from a kept cache reads paths of the job that kept it, which the sandbox refuses
    and inductor takes as a cache miss (measured on the H200: every such verdict was flagged)."""
    read_roots = [os.path.realpath(p) for p in read]
    write_roots = [os.path.realpath(p) for p in write]
    own_proc = os.path.realpath("/proc/self")
    origin = _prefixes([origin])
    skip = _prefixes(generated or [])

    def check_open(path, mode, flags) -> None:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # an open descriptor
        path = os.fsdecode(path)
        real = os.path.realpath(path)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        m = _PROC_OTHER.match(real)
        if m and not real.startswith(own_proc + "/"):
            text = f"read another process's {real}"
        elif writing and not _under(real, write_roots):
            text = f"write {path}"
        elif not writing and not _under(real, read_roots + write_roots):
            text = f"read {path}"
        else:
            return
        if _from(origin, skip):
            _note(text)

    def hook(event: str, args: tuple) -> None:
        if event not in WATCHED or getattr(_busy, "on", False):
            return
        _busy.on = True
        try:
            if event == "open":
                check_open(*args[:3])
            elif not _from(origin, skip):
                return
            elif event in ("socket.connect", "socket.bind"):
                _note(f"{event.split('.')[1]} {args[1]!r}")
            elif event == "os.system":
                _note(f"shell command {os.fsdecode(args[0])[:80]!r}")
            elif event in ("os.fork", "os.forkpty"):
                _note("a forked child process (it ends with the worker's PID namespace)")
        except Exception:  # noqa: BLE001 - observing must never break the worker
            pass
        finally:
            _busy.on = False

    sys.addaudithook(hook)


def annotate(verdict: dict) -> dict:
    """Add a `sandbox` flag naming what was refused; explain a refusal that ended the run."""
    if _seen:
        verdict.setdefault("flags", []).append({
            "kind": "sandbox",
            "reason": "the sandbox refused or contained what the candidate tried: " +
                      "; ".join(_seen)})
        if verdict.get("status") == "correct":
            verdict["status"] = "flagged"
    error = verdict.get("error") or ""
    if re.match(r"(PermissionError|OSError|ConnectionRefusedError|ConnectionError|"
                r"socket\.gaierror)\b", error) and "sandbox" not in error:
        verdict["error"] = error + (" (refused by the sandbox; if that path belongs to your toolchain, "
                                     "add it to [sandbox] read in config.toml)")
    return verdict
