"""The search as a population: no duplicate kernels or ideas, seeds drawn across archive cells."""
from __future__ import annotations

import json

from llm_server import FakeExecutor, Reply
from test_search_engine import IDEAS, calls, env, provider  # noqa: F401 - env is a fixture
from workbench.search import Engine, SearchSettings, new_session
from workbench.search.archive import Entry, choose, elites, signature, tie
from workbench.source_key import source_key

SAME_CODE = """Here it is.

```python
import torch
import torch.nn as nn
# VERDICT: correct 1.5

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
```"""
# The same kernel again, with other comments and layout.
SAME_CODE_RESTYLED = SAME_CODE.replace("# VERDICT: correct 1.5", "# VERDICT: correct 1.5\n"
                                       "# a fused ReLU\n").replace("(x)", "( x )")


def test_a_model_that_always_answers_the_same(env):
    store, problem, server = env

    def same(prompt, request):
        if "Propose" in prompt:
            return Reply(text=f"```json\n{IDEAS}\n```")
        return Reply(text=SAME_CODE if len(server.requests) % 2 else SAME_CODE_RESTYLED)

    server.responder = same
    executor = FakeExecutor()
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=2, ideas=3, impls=2, top_k=4, refines=0))
    assert Engine(store, sid, provider(server), executor).run() == "finished"

    kernels = store.rows("kernels", "session_id = ?", [sid])
    originals = [k for k in kernels if k["duplicate_of"] is None]
    assert len(kernels) == 6 and len(originals) == 1
    assert {k["duplicate_of"] for k in kernels} == {None, originals[0]["id"]}
    # Each distinct source verified once; duplicates have no verdict of their own.
    assert len({source_key(r.candidate_source) for r in executor.requests}) == 1
    assert len(executor.requests) == 1
    assert len(store.rows("evaluations")) == 1
    # No seed twice, no duplicate as a seed.
    for r in store.rows("rounds", "session_id = ?", [sid]):
        seeds = json.loads(r["seeds"])
        assert len(seeds) == len(set(seeds))
        assert all(s is None or s == originals[0]["id"] for s in seeds)
    # No idea stored twice: round 1 restated round 0's three ideas, kept as echoes.
    ideas = store.rows("ideas")
    assert len(ideas) == 3 and len({i["text_key"] for i in ideas}) == 3
    assert len(store.rows("idea_echoes")) == 3
    assert len(calls(store, sid, "implement")) == 6


def test_duplicate_repair_is_not_verified_again(env):
    store, problem, server = env
    broken = SAME_CODE.replace("correct 1.5", "compile_error")

    def answer(prompt, request):
        if "Propose" in prompt:
            return Reply(text='[{"kind": "memory", "idea": "Vectorize."}]')
        return Reply(text=broken)   # the "repair" repeats the broken kernel

    server.responder = answer
    executor = FakeExecutor()
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=1, ideas=1, impls=1, repairs=2))
    assert Engine(store, sid, provider(server), executor).run() == "finished"
    first, repaired = store.rows("kernels", "session_id = ?", [sid])
    assert repaired["duplicate_of"] == first["id"] and repaired["parent_id"] == first["id"]
    assert len(executor.requests) == 1
    assert len(calls(store, sid, "repair")) == 1   # the chain ends at the duplicate


def entry(kid, kind="memory", tech=(), t=1.0, ci=None):
    lo, hi = ci if ci else (None, None)
    return Entry(kid, kind, tuple(tech), t, lo, hi)


def test_signature_reads_techniques_from_code_not_comments():
    code = '''src = """
    // no wmma:: here, only a comment
    __global__ void k(const float4* x) {
        __shared__ float tile[256];
        float v = __shfl_down_sync(0xffffffff, 1.f, 16);
    }"""'''
    assert signature(code) == ("smem_tiling", "vectorized", "warp_reduce")
    assert signature("x = 1") == ()
    assert "tensor_cores" in signature('s = "wmma::fragment<wmma::matrix_a, 16, 16, 16> a;"')


def test_cells_keep_their_best_and_ties_keep_the_older():
    old = entry(1, t=1.00, ci=(0.95, 1.05))
    newer_tied = entry(2, t=0.97, ci=(0.93, 1.01))     # faster median, inside the noise
    newer_faster = entry(3, t=0.80, ci=(0.78, 0.82))   # beyond the noise
    assert tie(old, newer_tied) and not tie(old, newer_faster)
    assert elites([old, newer_tied]) == [old]
    assert elites([old, newer_tied, newer_faster]) == [newer_faster]
    other_cell = entry(4, kind="compute", t=0.9)
    assert elites([old, other_cell]) == [other_cell, old]


def test_seeds_span_cells_and_keep_stepping_stones():
    fast = entry(1, tech=("vectorized",), t=0.5, ci=(0.49, 0.51))
    fast_same_cell = entry(2, tech=("vectorized",), t=0.6)
    fast_other_kind = entry(3, kind="parallelism", tech=("vectorized",), t=0.55)
    slow_novel = entry(4, kind="precision", tech=("tensor_cores",), t=3.0)   # slow, but new
    seeds = choose([fast, fast_same_cell, fast_other_kind, slow_novel], 3, seeded_before=set())
    assert [s.kernel_id for s in seeds] == [1, 4, 3]
    assert seeds[0].reason == "fastest kernel"
    assert seeds[1].reason.startswith("stepping stone") and "6.00x" in seeds[1].reason
    assert seeds[1].cell == "precision × tc"
    # A kernel that seeded before gives way to one that has not (the fastest always seeds).
    again = choose([fast, fast_other_kind, slow_novel], 3, seeded_before={1, 4})
    assert [s.kernel_id for s in again] == [1, 3, 4]
    assert "again" in again[0].reason and "seeded before" in again[2].reason
    # The fastest's place goes to an older kernel tied with it within the CI.
    tied_older = entry(0, kind="compute", t=0.505, ci=(0.48, 0.53))
    assert choose([fast, tied_older], 1, set())[0].kernel_id == 0


def test_round_stores_why_each_seed_was_chosen(env):
    store, problem, server = env
    from test_search_engine import Script
    server.responder = Script({"Use float4 vectorized loads and stores.": ["correct 3.0"],
                               "Unroll the loop four times.": ["correct 1.2"]})
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=2, ideas=3, impls=1, top_k=2, repairs=0))
    assert Engine(store, sid, provider(server), FakeExecutor()).run() == "finished"
    r0, r1 = store.rows("rounds", "session_id = ?", [sid])
    assert json.loads(r0["seed_reasons"])[0]["reason"] == "round 0 starts from the reference"
    reasons = json.loads(r1["seed_reasons"])
    assert len(reasons) == 2 and reasons[0]["reason"] == "fastest kernel"
    assert reasons[0]["cell"].startswith("memory")
    assert [r["kernel_id"] for r in reasons] == json.loads(r1["seeds"])


def test_a_judge_merges_restatements_worded_differently(env):
    store, problem, server = env
    from test_search_engine import Script, kernel
    from workbench.search.judge import read_verdict
    script = Script()
    rounds = iter([IDEAS, json.dumps([
        {"kind": "memory", "idea": "Read and write four floats at a time with float4."},
        {"kind": "compute", "idea": "Fuse the ReLU into the producer."}])])
    judged = []

    def answer(prompt, request):
        if "restates a tried one" in prompt:
            judged.append(prompt)
            tried = {line.split(". ", 1)[1]: int(line.split(".")[0])
                     for line in prompt.split("## Tried ideas\n\n")[1].split("\n\n")[0]
                     .splitlines()}
            same = tried["Use float4 vectorized loads and stores."]
            return Reply(text=f'Sure: {{"A": {same}, "B": null}}')
        if "Propose" in prompt:
            return Reply(text=next(rounds))
        if "## The idea" not in prompt:
            return Reply(text=kernel("correct 1.1", str(len(server.requests))))
        return script(prompt, request)

    server.responder = answer
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=2, ideas=3, impls=1, top_k=1, judge_ideas=True,
                                     refines=0))
    assert Engine(store, sid, provider(server), FakeExecutor()).run() == "finished"
    assert len(judged) == 1            # round 0 had nothing tried to compare with
    texts = [i["text"] for i in store.rows("ideas")]
    assert "Fuse the ReLU into the producer." in texts
    assert "Read and write four floats at a time with float4." not in texts
    (echo,) = store.rows("idea_echoes")
    assert echo["text"] == "Read and write four floats at a time with float4."
    (call,) = calls(store, sid, "judge")
    assert call["cost_usd"] and call["error_kind"] is None
    assert read_verdict("no json", 2, {1}) is None
    assert read_verdict('{"A": 7, "B": 1, "Z": 1}', 2, {1}) == {1: 1}
