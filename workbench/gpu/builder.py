"""The clean builder: one process per build that never runs candidate code. Imports only torch
and the standard library.

Run as `python -m workbench.gpu.builder`, sandboxed like a worker (its own job directory, the
shared cache read-only). Imports torch's extension builder, then (a spare may wait here) reads
{"spec", "key"} as one JSON line on stdin: the arguments of a
candidate's load_inline call and the key the parent computed from them. Builds them with torch's
extension builder into $KWB_BUILD_DIR/<key> without importing the result, and prints one JSON
line tagged "kwb_build": {"ok": true} or {"error": "..."}. The parent copies the build into the
cache under that key. A worker ran candidate code before it asked, so nothing it says about a
build (its key, its files) is trusted; only the arguments are taken, and built here.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TAG = "kwb_build"


def _answer(**payload) -> None:
    print(json.dumps({TAG: True, **payload}), flush=True)


def main() -> None:
    from workbench.gpu import confine

    confine.enter()
    import torch.utils.cpp_extension  # noqa: F401 - before the request: a spare waits warm

    from workbench.gpu import buildhook

    request = json.loads(sys.stdin.readline() or "null")
    if not isinstance(request, dict):
        return  # the pool closed before this spare got a build
    spec, key = request["spec"], request["key"]
    if key != buildhook.build_key(spec):
        _answer(error="the build request's key does not match its arguments")
        return
    if spec.get("toolchain") != buildhook.toolchain():
        # Stored under a key that says another toolchain, it would be loaded by the wrong torch.
        _answer(error=f"the request names toolchain {spec.get('toolchain')!r}; this builder has "
                      f"{buildhook.toolchain()!r}")
        return
    try:
        buildhook.build(spec, Path(os.environ[buildhook.BUILD_ENV]) / key, key, load=False)
    except Exception as e:  # noqa: BLE001 - a compile error is an answer, not a crash
        _answer(error=f"{type(e).__name__}: {e}")
        return
    _answer(ok=True)


if __name__ == "__main__":
    main()
