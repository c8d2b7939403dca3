"""The candidate suite on a real GPU: honest kernels pass, each known cheat gets its verdict.

All candidates are submitted at once (as the search does), so this also exercises parallel
builds and the per-GPU queue. Run on the GPU box: `pytest -m gpu`.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from workbench.gpu.executor import EvalSettings
from workbench.gpu.verifier import request_for
from workbench.problems import load_problem

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent / "candidates"
FULL = EvalSettings()
QUICK = EvalSettings(time_budget_s=1.0, time_reference_compile=False, run_timeout_s=90)

# candidate file -> (problem, settings, allowed statuses, flag kinds that must be present)
EXPECT = {
    "silu_honest": ("silu", FULL, {"correct"}, set()),
    "softmax_honest": ("softmax", FULL, {"correct"}, set()),
    "silu_torch_headers": ("silu", FULL, {"correct"}, set()),
    "silu_compile_error": ("silu", QUICK, {"compile_error"}, set()),
    "silu_wrong": ("silu", QUICK, {"incorrect"}, set()),
    "silu_illegal_access": ("silu", QUICK, {"crashed"}, set()),
    "silu_hang": ("silu", dataclasses.replace(QUICK, run_timeout_s=40), {"timeout"}, set()),
    "silu_segfault": ("silu", QUICK, {"crashed"}, set()),
    "silu_oom": ("silu", QUICK, {"crashed"}, set()),
    "cheat_result_reuse": ("silu", QUICK, {"incorrect"}, set()),
    "cheat_partial": ("silu", QUICK, {"incorrect"}, set()),
    "cheat_mutate_inputs": ("silu", QUICK, {"flagged"}, {"input_mutation"}),
    "cheat_constant": ("silu", QUICK, {"incorrect"}, set()),
    "cheat_side_stream": ("silu", QUICK, {"flagged"}, {"side_stream", "hidden_work"}),
    "cheat_thread": ("silu", QUICK, {"flagged", "incorrect"}, {"threads"}),
    "cheat_lazy_subclass": ("silu", QUICK, {"incorrect"}, {"tensor_subclass"}),
    "cheat_patch_timer": ("silu", QUICK, {"flagged"}, {"patching"}),
    # Writing to every descriptor also hits the CUDA driver's (the warm worker's context is made
    # before the candidate is imported): the context dies, and `crashed` is as good a rejection.
    "cheat_forge_result": ("silu", QUICK, {"incorrect", "flagged", "crashed"},
                           {"forged_result", "io"}),
    "cheat_rng": ("silu", QUICK, {"incorrect"}, {"rng"}),
    "cheat_pointer_cache": ("silu", QUICK, {"incorrect", "flagged"}, {"caching"}),
    "cheat_defer": ("silu", QUICK, {"incorrect", "flagged"}, set()),
    "cheat_half_precision": ("silu", QUICK, {"incorrect"}, {"precision"}),
    "cheat_fallback": ("silu", QUICK, {"flagged"}, {"fallback", "pytorch_does_the_work"}),
    "cheat_pytorch_only": ("silu", QUICK, {"flagged"}, {"no_cuda_kernel", "pytorch_compute"}),
    "cheat_hidden_torch": ("silu", QUICK, {"flagged"}, {"pytorch_does_the_work"}),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    from workbench.gpu.pool import LocalPool

    pool = LocalPool()
    problems = {name: load_problem(name, smoke=False) for name in {"silu", "softmax"}}
    futures = {}
    for cand, (prob, settings, _, _) in EXPECT.items():
        source = (HERE / f"{cand}.py").read_text()
        futures[cand] = pool.submit(request_for(problems[prob], source, settings, label=cand))
    # The floor guard: an honest kernel judged against a problem that claims 1000x the bytes.
    silu = problems["silu"]
    inflated = dataclasses.replace(silu, min_bytes=silu.min_bytes * 1000)
    futures["below_floor"] = pool.submit(request_for(
        inflated, (HERE / "silu_honest.py").read_text(), QUICK, label="below_floor"))
    results = {name: f.result() for name, f in futures.items()}
    # After hangs, crashes and OOMs: the next candidate gets a fresh worker and a clean GPU.
    results["after_crashes"] = pool.submit(request_for(
        silu, (HERE / "silu_honest.py").read_text(), QUICK, label="after_crashes")).result()
    pool.shutdown()
    return results


@pytest.mark.parametrize("candidate", sorted(EXPECT))
def test_candidate_verdict(verdicts, candidate):
    _, _, statuses, kinds = EXPECT[candidate]
    v = verdicts[candidate]
    found = {f["kind"] for f in v["flags"]}
    assert v["status"] in statuses, (v["status"], v["error"], v["flags"])
    assert kinds <= found, (found, v["error"])


def test_honest_kernels_are_timed_with_confidence(verdicts):
    for name in ("silu_honest", "softmax_honest"):
        v = verdicts[name]
        assert v["verified"] and v["trials"] >= 5
        lo, hi = v["ci95_ms"]
        assert lo <= v["time_ms"] <= hi
        assert v["ref_eager_ms"] > 0 and v["ref_compile_ms"] > 0
        assert v["speedup_eager_ci95"][0] <= v["speedup_eager"] <= v["speedup_eager_ci95"][1]
        # Memory-bound ops: an honest kernel sits at or above the floor, never far below it.
        assert v["time_ms"] >= 0.85 * v["floor_ms"]
        assert v["max_rel_err"] < 1e-3  # of the output's RMS: fp32-accurate, not fp16


def test_crash_verdicts_say_what_happened(verdicts):
    assert "illegal memory access" in verdicts["silu_illegal_access"]["error"]
    assert "SIGSEGV" in verdicts["silu_segfault"]["error"]
    assert "out of memory" in verdicts["silu_oom"]["error"].lower()
    assert "xx" in verdicts["silu_compile_error"]["error"]


def test_below_floor_is_flagged(verdicts):
    v = verdicts["below_floor"]
    assert v["status"] == "flagged"
    assert "below_floor" in {f["kind"] for f in v["flags"]}


def test_next_candidate_after_crashes_is_clean_and_cached(verdicts):
    v = verdicts["after_crashes"]
    assert v["status"] == "correct", (v["error"], v["flags"])
    assert v["cache_hit"] and v["compile_s"] < 0.3


def test_hang_is_killed_by_the_adaptive_watchdog(verdicts):
    v = verdicts["silu_hang"]
    # Killed by the per-call limit (max(2 s, 100x the reference's eager call), at most 12 s),
    # long before the whole turn's 40 s cap.
    assert v["status"] == "timeout" and "a call on the GPU ran longer than" in v["error"], v["error"]
