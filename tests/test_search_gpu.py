"""One full search round through the real verifier on a GPU: `pytest -m gpu` on the GPU box."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_server import FakeLLMServer, Reply
from workbench.gpu.executor import EvalSettings
from workbench.llm import make_provider
from workbench.problems import load_problem
from workbench.search import Engine, SearchSettings, best_kernel, new_session, session_table
from workbench.store import Store

pytestmark = pytest.mark.gpu
HONEST = (Path(__file__).parent / "candidates" / "silu_honest.py").read_text()


def test_one_round_through_the_local_pool(tmp_path, monkeypatch):
    from workbench.gpu.pool import LocalPool

    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    ideas = json.dumps([{"kind": "memory", "idea": "Vectorized float4 SiLU."}])
    settings = SearchSettings(rounds=1, ideas=1, impls=1, repairs=0, refines=0, eval=EvalSettings(
        time_budget_s=1.0, time_reference_compile=False, run_timeout_s=120))
    store = Store(tmp_path / "k.db")
    pool = LocalPool()
    with FakeLLMServer() as server:
        server.push(Reply(text=f"```json\n{ideas}\n```"),
                    Reply(text=f"Here it is.\n\n```python\n{HONEST}\n```\nEnjoy."))
        provider = make_provider("openai-compatible", "local", server.openai_url, retries=0,
                                 timeout_s=10)
        sid = new_session(store, load_problem("silu", smoke=False), "openai-compatible",
                          "local", server.openai_url, settings)
        try:
            assert Engine(store, sid, provider, pool).run() == "finished"
        finally:
            pool.shutdown()
    (row,) = session_table(store, sid)
    verdict = json.loads(store.latest_evaluation(row["kernel"])["verdict"])
    assert row["status"] == "correct" and verdict["verified"], verdict.get("error")
    assert verdict["time_ms"] > 0 and verdict["speedup_eager"] > 0
    assert best_kernel(store, sid)["id"] == row["kernel"]
