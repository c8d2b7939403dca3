"""The worker sandbox on the GPU box: every layer is there, the driver stays reachable (an honest
kernel is correct under the sandbox), and the hostile payloads are refused in full GPU mode too.
Run there: `pytest -m gpu tests/test_gpu_sandbox.py`."""
from __future__ import annotations

import base64
import secrets
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from workbench.gpu import sandbox
from workbench.gpu.executor import EvalSettings
from workbench.gpu.verifier import request_for
from workbench.problems import load_problem

from sandbox_support import CANDIDATES, cli_eval, left_in, sandbox_reason, source

pytestmark = pytest.mark.gpu
QUICK = EvalSettings(time_budget_s=1.0, time_reference_compile=False, run_timeout_s=90)


def test_every_layer_is_available_here():
    assert sandbox.support().missing == []


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Honest candidates and the pool-run payloads, submitted together to one sandboxed pool."""
    from workbench.gpu.pool import LocalPool

    cache = tmp_path_factory.mktemp("kwb-gpu-sandbox")
    victim = cache / "ext" / "ab" / ("ab" + "0" * 62) / "victim.so"
    victim.parent.mkdir(parents=True)
    victim.write_bytes(b"original")
    pool = LocalPool(cache_dir=cache, spares=False)
    silu = load_problem("silu", smoke=False)
    server = socket.create_server(("127.0.0.1", 0))
    sources = {
        "silu_honest": (CANDIDATES / "silu_honest.py").read_text(),
        "silu_torch_headers": (CANDIDATES / "silu_torch_headers.py").read_text(),
        "hostile_write_home": source("hostile_write_home"),
        "hostile_read_file": source("hostile_read_file"),
        "hostile_connect": source("hostile_connect", PORT=str(server.getsockname()[1])),
        "hostile_write_cache": source("hostile_write_cache"),
    }
    settings = {"silu_honest": EvalSettings()}
    futures = {name: pool.submit(request_for(silu, text, settings.get(name, QUICK), label=name))
               for name, text in sources.items()}
    verdicts = {name: f.result() for name, f in futures.items()}
    server.settimeout(0.2)
    try:
        server.accept()
        verdicts["accepted"] = True
    except TimeoutError:
        verdicts["accepted"] = False
    server.close()
    pool.shutdown()
    return verdicts, cache, victim


@pytest.mark.parametrize("name", ["silu_honest", "silu_torch_headers"])
def test_honest_kernels_are_correct_under_the_sandbox(run, name):
    v = run[0][name]
    assert v["status"] == "correct", (v["status"], v["error"], v["flags"])
    assert v["verified"] and "sandbox" not in {f["kind"] for f in v["flags"]}
    assert v["time_ms"] > 0 and v["floor_ms"] > 0


def test_hostile_payloads_are_refused_on_the_gpu(run):
    verdicts, cache, victim = run
    assert "write /root/kwb_hostile_marker_home" in sandbox_reason(verdicts["hostile_write_home"])
    assert "read /etc/passwd" in sandbox_reason(verdicts["hostile_read_file"])
    assert "connect" in sandbox_reason(verdicts["hostile_connect"]) and not verdicts["accepted"]
    assert "kwb_hostile_marker_cache" in sandbox_reason(verdicts["hostile_write_cache"])
    assert victim.read_bytes() == b"original"
    for home in {str(Path.home()), "/root", "/tmp", str(cache)}:
        assert not list(Path(home).glob("kwb_hostile_marker*"))
    assert list((cache / "jobs").iterdir()) == []
    assert left_in(cache) == []


@pytest.mark.parametrize("hide", [False, True], ids=["plain", "exec_base64"])
def test_no_forged_verdict_and_no_key_on_the_gpu(tmp_path, hide):
    canary = "sk-canary-" + secrets.token_hex(8)
    text = source("hostile_setsid_db", DB=str(tmp_path / "k.db"))
    if hide:
        text = source("hostile_exec_base64",
                      PAYLOAD=base64.b64encode(text.split('"""', 2)[2].encode()).decode())
    text += "\n" + source("hostile_parent_environ").split('"""', 2)[2]
    v, db = cli_eval(tmp_path, text, {"OPENAI_API_KEY": canary})
    time.sleep(3)
    assert canary not in v["build_log"]
    assert left_in(tmp_path) == []
    assert sqlite3.connect(db).execute("select status from evaluations").fetchall() == \
        [(v["status"],)]
