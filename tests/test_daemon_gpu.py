"""`eval` through the verifier daemon on a real GPU: the verdict of the in-process path, and
the second eval of a problem served by a spare that prepared the reference while the daemon
waited. Run on the GPU box: `pytest -m gpu`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from workbench.gpu import daemon_link

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent / "candidates"


def test_eval_through_the_daemon_matches_in_process_and_reuses_a_warm_spare(tmp_path):
    sockets = Path(tempfile.mkdtemp(prefix="kwb-", dir="/tmp"))
    env = {**os.environ, "KERNEL_WORKBENCH_CACHE": str(tmp_path / "cache"),
           daemon_link.DIR_ENV: str(sockets), daemon_link.DISABLE_ENV: "1"}

    def kwb(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "workbench", *args], env=env,
                              capture_output=True, text=True, timeout=400)

    def evaluate(*extra: str) -> subprocess.CompletedProcess:
        done = kwb("eval", "silu", str(HERE / "silu_honest.py"), "--db",
                   str(tmp_path / "k.db"), "--retime", *extra)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    def spare_ready() -> dict:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            (state,) = json.loads(kwb("daemon", "status", "--json").stdout)
            if state["spares_ready"]:
                return state
            time.sleep(0.5)
        raise AssertionError(f"no spare ready in the daemon: {state}")

    try:
        alone = json.loads(evaluate("--no-daemon", "--json").stdout)
        first = evaluate()                      # starts the daemon; its worker starts cold
        state = spare_ready()
        warm = evaluate()                       # the spare that waited
        spare_ready()
        last = json.loads(evaluate("--json").stdout)
        (after,) = json.loads(kwb("daemon", "status", "--json").stdout)
    finally:
        kwb("daemon", "stop")
        shutil.rmtree(sockets, ignore_errors=True)
    for v in (alone, last):
        assert v["status"] == "correct" and v["verified"], (v.get("error"), v.get("flags"))
        assert v["speedup_eager"] is not None and v["speedup_compile"] is not None, \
            {k: x for k, x in v.items() if "compile" in k or "error" in k}
    # The first eval built into an empty cache; the daemon's evals used that build.
    assert not alone["cache_hit"] and last["cache_hit"]
    for run in (first, warm):
        assert "status: correct" in run.stdout, run.stderr[-2000:]
    assert "started the verifier daemon" in first.stderr
    assert state["gpus"] and after["pid"] == state["pid"] and after["served"] == 3
    # The spare had prepared the reference while the daemon waited: the warm eval never did.
    assert "] preparing" in first.stderr and "] preparing" not in warm.stderr, warm.stderr
