"""Hardware evidence through the real verifier on a GPU (`pytest -m gpu` on the GPU box): one
round against the local LLM server stores evidence for every timed kernel, and the next round's
ideation prompt (read back from llm_calls) carries the seed's registers, occupancy, achieved
bandwidth fraction and bottleneck class; `kernel-workbench profile` agrees with the verifier."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_server import FakeLLMServer, Reply
from workbench.cli import main
from workbench.evidence import diagnose, nsight
from workbench.gpu.executor import EvalSettings
from workbench.llm import make_provider
from workbench.problems import load_problem
from workbench.search import Engine, SearchSettings, new_session
from workbench.store import Store

pytestmark = pytest.mark.gpu
HONEST = (Path(__file__).parent / "candidates" / "silu_honest.py").read_text()


def _answer(prompt: str, request) -> Reply:
    if "Propose" in prompt:
        n = prompt.count("## Ideas already tried") + prompt.count(" → ")
        return Reply(text=json.dumps([{"kind": "memory", "idea": f"Vectorized SiLU, take {n}."}]))
    return Reply(text=f"```python\n{HONEST}\n```")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from workbench.gpu.pool import LocalPool

    store = Store(tmp_path_factory.mktemp("evidence") / "k.db")
    settings = SearchSettings(rounds=2, ideas=1, impls=1, top_k=1, repairs=0, refines=0,
                              eval=EvalSettings(time_budget_s=2.0, run_timeout_s=180))
    pool = LocalPool()
    with FakeLLMServer(responder=_answer) as server:
        provider = make_provider("openai-compatible", "local", server.openai_url, retries=0,
                                 timeout_s=30)
        sid = new_session(store, load_problem("silu", smoke=False), "openai-compatible",
                          "local", server.openai_url, settings)
        try:
            assert Engine(store, sid, provider, pool).run() == "finished"
        finally:
            pool.shutdown()
    return store, sid


def test_every_timed_kernel_has_its_evidence(session):
    store, sid = session
    timed = [e for e in store.rows("evaluations") if e["time_ms"] is not None]
    assert timed, [e["error"] for e in store.rows("evaluations")]
    for e in timed:
        p = store.kernel_profiles(e["kernel_id"])
        assert {"resources", "runtime", "bottleneck"} <= set(p), p.keys()
        print("resources:", p["resources"]["summary"])
        rt = p["runtime"]["data"]
        own = [k for k in rt["kernels"] if "silu_kernel" in k["name"]]
        assert own and own[0]["registers"] and own[0]["block"] and own[0]["grid"]
        assert own[0]["occupancy"] is not None and 0 < own[0]["occupancy"] <= 1
        assert 0.2 < rt["bandwidth_fraction"] < 1.15, rt["bandwidth_fraction"]
        assert rt["device"]["sms"] > 0 and "float16" in rt["ceilings"]["flops_per_s"]
        assert p["bottleneck"]["data"]["class"] in diagnose.CLASSES
        verdict = json.loads(e["verdict"])
        print(f"kernel {e['kernel_id']}: {p['bottleneck']['summary']}; profiler pass (s): "
              f"{(verdict.get('phase_s') or {}).get('profile')}")


def test_next_ideation_prompt_carries_the_seeds_evidence(session):
    store, sid = session
    ideate = store.rows("llm_calls", "purpose = 'ideate' and session_id = ?", [sid])
    assert len(ideate) == 2
    prompt, seed = ideate[1]["prompt"], ideate[1]["kernel_id"]
    p = store.kernel_profiles(seed)
    rt = p["runtime"]["data"]
    own = [k for k in rt["kernels"] if "silu_kernel" in k["name"]][0]
    row = [line for line in prompt.splitlines() if line.startswith("| silu_kernel |")]
    assert row, prompt
    assert f"| {own['registers']} |" in row[0]
    assert f"{100 * own['occupancy']:.0f}% ({own['occupancy_limiter']})" in row[0]
    assert f"{diagnose.percent(rt['bandwidth_fraction'])} of measured DRAM bandwidth" in prompt
    assert f"Bottleneck: {p['bottleneck']['data']['class']}" in prompt
    assert "SMs; per SM:" in prompt and "Measured ceilings: DRAM" in prompt
    print(prompt.split("## The GPU")[1].split("## Ideas already tried")[0])


def test_profile_command_agrees_with_the_verifier(session):
    store, sid = session
    why = nsight.unavailable([0])
    if why:
        pytest.skip(why)
    seed = store.rows("llm_calls", "purpose = 'ideate' and session_id = ?", [sid])[1]["kernel_id"]
    result = CliRunner().invoke(main, ["profile", str(seed), "--db", str(store.path)])
    print(result.output)
    assert result.exit_code == 0, result.output
    data = store.kernel_profiles(seed)["ncu"]["data"]
    assert data["main"]["dram_pct"] > 50 and "silu_kernel" in data["main"]["name"]
    v = data["verifier"]
    assert abs(v["ncu_bandwidth_fraction"] - v["bandwidth_fraction"]) <= \
        0.1 * v["bandwidth_fraction"], v
    print(f"ncu time for this kernel: {data['seconds']:.1f} s")
