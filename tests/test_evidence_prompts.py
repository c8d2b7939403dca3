"""Evidence in the prompts: the GPU, the seed's registers / occupancy / bandwidth fraction /
bottleneck, the lineage, and the engineer's choice of evidence and note, stored with the call.
Real OpenAI client against the local fake server; a fake verifier whose timed verdicts carry the
fields the GPU worker adds (device, ceilings, launches) and the parent's cuobjdump resources."""
from __future__ import annotations

import json

import pytest

from llm_server import FakeExecutor
from test_search_engine import Script, env, provider  # noqa: F401 - env is a fixture
from workbench.evidence import diagnose, render
from workbench.search import Engine, SearchSettings, new_session, resume_session
from workbench.store import Store

H200 = {"name": "NVIDIA H200", "arch": "sm_90", "sms": 132, "l2_bytes": 60 * 2**20,
        "smem_per_sm": 233472, "smem_per_block_optin": 232448, "regs_per_sm": 65536,
        "max_threads_per_sm": 2048, "warp_size": 32}
CEILINGS = {"bytes_per_s": 4.24e12,
            "flops_per_s": {"float32": 51.1e12, "float16": 740e12, "bfloat16": 745e12}}
ROUND1_IDEAS = json.dumps([
    {"kind": "parallelism", "idea": "Cap registers at 64 with launch bounds to lift occupancy."},
    {"kind": "memory", "idea": "Process two float4 per thread to raise bytes in flight."}])


class EvidenceExecutor(FakeExecutor):
    """Timed verdicts with one 'relu_kernel' launch at 128 registers (25% occupancy)."""

    def _verdict(self, request, *args) -> dict:
        v = super()._verdict(request, *args)
        if v.get("time_ms"):
            v.update(device=H200, ceilings=CEILINGS, cache_key="k", launches=[
                {"name": "relu_kernel(float const*, float*, long)", "us": 0.97 * v["time_ms"] * 1e3,
                 "launches": 1, "grid": [4096, 1, 1], "block": [256, 1, 1], "registers": 128,
                 "shared_bytes": 0, "est_occupancy_pct": 24}],
                resources={"tool": "cuobjdump", "kernels": [
                    {"symbol": "_Z11relu_kernelPKfPfl", "name": "relu_kernel", "registers": 128,
                     "shared_bytes": 1024, "stack_bytes": 16, "local_bytes": 0,
                     "constant_bytes": 552}]})
        return v


def _engine(store, sid, server):
    if server.responder is None:
        server.responder = Script()
    return Engine(store, sid, provider(server), EvidenceExecutor())


def test_next_round_ideation_sees_the_seeds_evidence(env):
    store, problem, server = env
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=1, ideas=2, impls=1, top_k=1, repairs=0))
    assert _engine(store, sid, server).run() == "finished", store.get("sessions", sid)["stop_reason"]
    (ideate0,) = store.rows("llm_calls", "purpose = 'ideate'")
    assert "None yet: the starting point is the PyTorch reference." in ideate0["prompt"]
    assert json.loads(ideate0["evidence"]) == {}
    # Every timed kernel has its evidence stored.
    for k in store.rows("kernels"):
        assert {"resources", "runtime", "bottleneck"} <= set(store.kernel_profiles(k["id"]))

    resume_session(store, sid, rounds=2)
    server.responder = Script(ideas=ROUND1_IDEAS)   # new ideas: restated ones are merged
    assert _engine(store, sid, server).run() == "finished"
    ideate1 = store.rows("llm_calls", "purpose = 'ideate'")[1]
    prompt, seed = ideate1["prompt"], ideate1["kernel_id"]
    assert "NVIDIA H200 (sm_90), 132 SMs" in prompt and "DRAM 4.24 TB/s" in prompt
    assert "float16 740.0 TFLOP/s" in prompt
    row = [line for line in prompt.splitlines() if line.startswith("| relu_kernel |")][0]
    assert "| 128 |" in row and "25% (registers)" in row and "| 16 |" in row
    # 8 MiB in 1/1.5 ms: 0.3% of the bandwidth, a latency-bound kernel at 25% occupancy.
    frac = store.kernel_profiles(seed)["runtime"]["data"]["bandwidth_fraction"]
    assert f"{diagnose.percent(frac)} of measured DRAM bandwidth" in prompt
    bottleneck = store.kernel_profiles(seed)["bottleneck"]
    assert f"Bottleneck: {bottleneck['summary']}" in prompt
    assert (f"Aim the ideas at the diagnosed bottleneck — {bottleneck['data']['class']}, by the "
            "figures above") in " ".join(prompt.split())
    given = json.loads(ideate1["evidence"])
    assert given["kernel_id"] == seed and "runtime" in given["attached"]
    # Implementations of round-1 ideas see their starting point's evidence.
    impl = store.rows("llm_calls", "purpose = 'implement'")[-1]
    assert "| relu_kernel |" in impl["prompt"] and json.loads(impl["evidence"])["kernel_id"] == seed


def test_engineer_chooses_the_evidence_and_adds_a_note(env):
    store, problem, server = env
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=1, ideas=1, impls=1, top_k=1, repairs=0, refines=0))
    assert _engine(store, sid, server).run() == "finished"
    (seed,) = [k["id"] for k in store.rows("kernels")]
    store.set_evidence_choice(seed, ["bottleneck"], "the tail block is idle: try a persistent grid")
    resume_session(store, sid, rounds=2)
    assert _engine(store, sid, server).run() == "finished"
    ideate1 = store.rows("llm_calls", "purpose = 'ideate'")[1]
    assert "The engineer's note: the tail block is idle: try a persistent grid" in ideate1["prompt"]
    assert "| relu_kernel |" not in ideate1["prompt"]            # the table was detached
    assert json.loads(ideate1["evidence"]) == {
        "kernel_id": seed, "attached": ["bottleneck"],
        "note": "the tail block is idle: try a persistent grid"}


def test_gpu_text_without_any_timed_run(tmp_path, monkeypatch):
    store = Store(tmp_path / "k.db")
    monkeypatch.setattr(render.cuda_env, "list_gpus", lambda: [])
    assert render.gpu_text(store, 1) == "No GPU measured yet (ceilings unknown)."
    assert render.bottleneck_of(store, None).startswith("not diagnosed yet")


def test_refine_sends_the_top_kernel_back_with_its_evidence(env):
    store, problem, server = env
    server.responder = Script({"refine": "correct 3.0"})      # implementations run at 1.5x
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=1, ideas=1, impls=1, top_k=1, repairs=0, refines=2))
    assert _engine(store, sid, server).run() == "finished"
    (first,) = [k["id"] for k in store.rows("kernels", "origin = 'llm'")]
    refines = store.rows("llm_calls", "purpose = 'refine'")
    # Serial: the kernel, then its faster child (depth 1 < 2); the grandchild is depth 2.
    children = store.rows("kernels", "origin = 'refine'")
    assert [c["kernel_id"] for c in refines] == [first, children[0]["id"]]
    assert [(c["parent_id"], c["attempt"]) for c in children] == [
        (first, 1), (children[0]["id"], 2)]
    prompt = refines[0]["prompt"]
    assert "This kernel is correct. Make it faster" in prompt and f"Kernel {first}:" in prompt
    assert "| relu_kernel |" in prompt and "Bottleneck: " in prompt
    assert json.loads(refines[0]["evidence"])["kernel_id"] == first
    # Every child is verified once, and its change from the parent is stored and shown.
    for c in children:
        assert len(store.rows("evaluations", "kernel_id = ?", [c["id"]])) == 1
    change = store.kernel_profiles(children[0]["id"])["change"]
    assert change["data"]["verdict"] == "faster" and change["data"]["parent_id"] == first
    assert change["data"]["relative"] == pytest.approx(1.5 / 3.0 - 1)
    assert change["summary"].startswith(f"kernel {first} -> this: 0.6667 -> 0.3333 ms (-50.0%")
    assert "Change from its parent: kernel" in refines[1]["prompt"]


@pytest.mark.parametrize("settings", [{"refines": 0}, {"eval": {"no_gpu": True}}])
def test_no_refine_when_turned_off_or_without_a_gpu(env, settings):
    store, problem, server = env
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings.from_dict({"rounds": 1, "ideas": 1, "impls": 1, **settings}))
    assert _engine(store, sid, server).run() == "finished"
    assert store.rows("llm_calls", "purpose = 'refine'") == []
