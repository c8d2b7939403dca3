"""Turn compiler and crash output into the few lines a user needs. Standard library only."""
from __future__ import annotations

import re
import signal

ERROR_LINE = re.compile(r"(\berror\b|: fatal|undefined symbol|undefined reference)", re.IGNORECASE)
NOISE = re.compile(r"ninja: build stopped|subprocess\.CalledProcessError|^\s*$|"
                   r"Error building extension|FAILED: ")
BUILD_PATH = re.compile(r"/\S*/(main\.cpp|cuda\.cu)")


def tail(text: str, limit: int = 4000) -> str:
    return text[-limit:]


def first_errors(message: str, log: str, limit: int = 12) -> str:
    """The first real compiler errors (with the line after each, which holds the context),
    not a 300-line dump."""
    lines = (message + "\n" + log).splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        if ERROR_LINE.search(line) and not NOISE.search(line):
            for extra in lines[i:i + 2]:
                extra = BUILD_PATH.sub(r"\1", extra.rstrip())
                if extra and extra not in picked:
                    picked.append(extra)
        if len(picked) >= limit:
            break
    if picked:
        return "\n".join(picked[:limit])
    return (message.strip().splitlines() or ["build failed (no compiler message)"])[-1][:500]


def crash_reason(error: str | None, log: str, returncode: int | None) -> str:
    if error:
        return error[:1000]
    if returncode is not None and returncode > 128:
        returncode = 128 - returncode  # the sandbox's PID 1 reports a signal the shell's way
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        reason = f"the worker died with {name}"
    else:
        reason = f"the worker exited with code {returncode} before reporting"
    cuda = [line for line in log.splitlines() if re.search(r"CUDA error|illegal|out of memory", line)]
    return reason + (f": {cuda[-1].strip()}" if cuda else "")
