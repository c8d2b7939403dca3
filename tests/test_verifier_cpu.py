"""Verifier behaviour that needs no GPU: static guards, statistics, comparison, build logs, and
the worker pool's handling of builds, hangs, crashes and forged results (no-GPU mode)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from workbench.cli import main
from workbench.gpu import buildlog, guards, stats
from workbench.gpu.compare import compare
from workbench.gpu.executor import EvalSettings
from workbench.gpu.verifier import request_for
from workbench.problems import load_problem

CANDIDATES = Path(__file__).parent / "candidates"

STATIC = {
    "silu_honest": set(), "softmax_honest": set(), "silu_torch_headers": set(),
    "cheat_side_stream": {"side_stream"}, "cheat_thread": {"threads"},
    "cheat_lazy_subclass": {"tensor_subclass"}, "cheat_patch_timer": {"patching"},
    "cheat_forge_result": {"io"}, "cheat_rng": {"rng"}, "cheat_pointer_cache": {"caching"},
    "cheat_half_precision": {"precision"}, "cheat_fallback": {"fallback"},
    "cheat_pytorch_only": {"no_cuda_kernel", "pytorch_compute"},
}


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_guards(name):
    kinds = {f["kind"] for f in guards.check((CANDIDATES / f"{name}.py").read_text())}
    if STATIC[name]:
        assert STATIC[name] <= kinds
    else:
        assert kinds == set()


def test_guard_reasons_name_the_line():
    flags = guards.check((CANDIDATES / "cheat_fallback.py").read_text())
    fallback = next(f for f in flags if f["kind"] == "fallback")
    assert fallback["reason"].startswith("line ")


def test_guards_allow_calls_on_the_extension_module():
    source = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
              "ops = load_inline(name='a', cpp_sources='', cuda_sources='__global__ void k(){}')\n"
              "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
              "        return ops.softmax(x)\n")
    assert guards.check(source) == []


def test_median_ci_brackets_the_median_and_narrows():
    xs = [1.0 + 0.01 * ((i * 37) % 17) for i in range(400)]
    lo, hi = stats.median_ci95(xs)
    assert lo <= stats.median(xs) <= hi
    assert stats.rel_half_width(xs) < stats.rel_half_width(xs[:40])
    ratio, (rlo, rhi) = stats.ratio_summary([2.0] * 50, [1.0] * 50)
    assert ratio == 2.0 and rlo == rhi == 2.0


def test_compare_rejects_zeros_for_tiny_outputs():
    ref = torch.softmax(torch.rand(64, 65536, dtype=torch.float64) * 0.5, dim=1).float()
    assert compare(ref.clone(), ref, 1e-4, 1e-4).ok
    zeros = compare(torch.zeros_like(ref), ref, 1e-4, 1e-4)
    assert not zeros.ok and "outside tolerance" in zeros.reason
    # A plain allclose would have passed it: that is the trap this check avoids.
    assert torch.allclose(torch.zeros_like(ref), ref, atol=1e-4, rtol=1e-4)


def test_compare_rejects_nan_shape_dtype_and_subclasses():
    ref = torch.randn(8, 8)
    bad = ref.clone()
    bad[3, 3] = math.nan
    assert "NaN" in compare(bad, ref, 1e-4, 1e-4).reason
    assert "shape" in compare(ref[:4], ref, 1e-4, 1e-4).reason
    assert "dtype" in compare(ref.double(), ref, 1e-4, 1e-4).reason

    class Sub(torch.Tensor):
        pass

    assert "subclass" in compare(ref.clone().as_subclass(Sub), ref, 1e-4, 1e-4).reason


def test_compare_measures_fp32_vs_half_error():
    ref = torch.randn(1000, 1000)
    assert not compare(ref.half().float(), ref, 1e-4, 1e-4).ok
    assert compare(ref.half().float(), ref, 1e-2, 1e-2).ok


def test_a_verdict_without_torch_compile_says_why():
    from workbench.gpu.verdict import describe

    v = {"status": "correct", "verified": True, "time_ms": 0.5, "ci95_ms": [0.49, 0.51],
         "ref_eager_ms": 1.0, "ref_compile_ms": None, "speedup_eager": 2.0,
         "speedup_compile": None, "compile_reference_error": "PermissionError: [Errno 13] x"}
    text = describe(v)
    assert "torch.compile of the reference failed, so it was not timed: PermissionError" in text
    assert "failed" not in describe({**v, "compile_reference_error": None})


def test_a_compile_failure_says_where_in_torch():
    from workbench.gpu.evaluate import compile_failure

    try:
        try:
            torch.nn.functional.interpolate(torch.ones(1), size=2)
        except Exception as inner:  # noqa: BLE001 - wrapped as inductor wraps its errors
            raise RuntimeError("wrapped: the first line\n\nSet TORCHDYNAMO_VERBOSE=1") from inner
    except RuntimeError as e:
        text = compile_failure(e)
    assert text.startswith("RuntimeError: wrapped: the first line (at torch/nn/functional.py:")
    assert "VERBOSE" not in text and len(text) <= 300


def test_first_errors_picks_compiler_lines():
    log = ("ninja: build stopped: subcommand failed.\n" + "noise\n" * 200 +
           "/root/.cache/kernel-workbench/ext/ab/abc/cuda.cu(4): error: identifier \"xx\" is undefined\n"
           "      if (i < n) y[i] = x[i] / (1.f + __expf(-xx[i]));\n")
    text = buildlog.first_errors("Error building extension 'x'", log)
    assert text.startswith("cuda.cu(4): error: identifier \"xx\"")
    assert len(text.splitlines()) <= 12


# ---- the pool, in no-GPU mode (compile + static guards), with real worker processes -------

@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from workbench.gpu.pool import LocalPool

    p = LocalPool(gpus=[], cache_dir=tmp_path_factory.mktemp("kwb-cache"))
    yield p
    p.shutdown()


@pytest.fixture(scope="module")
def silu():
    return load_problem("silu", smoke=False)


def _submit(pool, problem, source, **settings):
    s = EvalSettings(no_gpu=True, **settings)
    return pool.submit(request_for(problem, source, s, label="test")).result()


@pytest.fixture(scope="module")
def honest_build(pool, silu):
    """One real nvcc build of the honest candidate, shared by the tests that need one."""
    return _submit(pool, silu, (CANDIDATES / "silu_honest.py").read_text())


def test_real_build_records_sources(honest_build):
    v = honest_build
    assert v["status"] == "unverified" and not v["verified"]
    assert v["compile_s"] > 0 and v["cache_key"]
    (ext,) = v["extensions"]
    assert ext["functions"] == ["silu"] and "__global__" in ext["cuda_sources"][0]


def test_second_build_is_a_cache_hit(pool, silu, honest_build):
    again = _submit(pool, silu, (CANDIDATES / "silu_honest.py").read_text())
    assert again["cache_hit"] and again["cache_key"] == honest_build["cache_key"]
    assert again["compile_s"] < 1.0
    changed = (CANDIDATES / "silu_honest.py").read_text().replace(
        'functions=["silu"])', 'functions=["silu"], extra_cuda_cflags=["-lineinfo"])')
    other = _submit(pool, silu, changed, compile_timeout_s=0.5)
    # A different flag is a different key; the short limit stops the fresh build early.
    assert other["status"] == "timeout" and other.get("cache_key") in (None, "")


def test_static_notes_reach_the_verdict(pool, silu, honest_build):
    """PyTorch kept around the candidate's own kernel is a note in the verdict, not a flag (the
    notes were once computed and dropped)."""
    source = (CANDIDATES / "silu_honest.py").read_text().replace(
        "return ext.silu(x)", "return torch.relu(ext.silu(x))")
    v = _submit(pool, silu, source)
    assert v["status"] == "unverified" and v["cache_hit"] and not v["flags"]
    assert [n["kind"] for n in v["notes"]] == ["pytorch_compute"]


def test_compile_error_is_short_and_specific(pool, silu):
    v = _submit(pool, silu, (CANDIDATES / "silu_compile_error.py").read_text())
    assert v["status"] == "compile_error"
    assert "xx" in v["error"] and len(v["error"].splitlines()) <= 12


def test_hang_at_import_times_out(pool, silu):
    v = _submit(pool, silu, "while True:\n    pass\n", compile_timeout_s=3)
    assert v["status"] == "timeout" and "compiling" in v["error"]


def test_segfault_costs_only_the_worker(pool, silu, honest_build):
    v = _submit(pool, silu, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert v["status"] == "crashed" and "SIGSEGV" in v["error"]
    after = _submit(pool, silu, (CANDIDATES / "silu_honest.py").read_text())
    assert after["status"] == "unverified" and after["cache_hit"]


def test_broken_candidates_are_compile_errors(pool, silu):
    assert _submit(pool, silu, "def broken(:\n")["status"] == "compile_error"
    missing = _submit(pool, silu, "import torch\nx = 1\n")
    assert missing["status"] == "compile_error" and "ModelNew" in missing["error"]
    raising = _submit(pool, silu, "raise ValueError('boom at import')\n")
    assert raising["status"] == "compile_error" and "boom at import" in raising["error"]


def test_forged_results_are_ignored_and_flagged(pool, silu):
    source = (CANDIDATES / "cheat_forge_result.py").read_text()
    v = _submit(pool, silu, source)
    kinds = {f["kind"] for f in v["flags"]}
    assert v["status"] == "flagged" and {"forged_result", "io"} <= kinds


def test_eval_command_json(tmp_path, monkeypatch, honest_build, pool):
    monkeypatch.setenv("KERNEL_WORKBENCH_CACHE", str(pool.cache_dir))
    db = tmp_path / "k.db"
    result = CliRunner().invoke(main, ["eval", "silu", str(CANDIDATES / "silu_honest.py"),
                                       "--no-gpu", "--json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    for key in ("status", "compile_s", "cache_hit", "max_abs_err", "max_rel_err", "trials",
                "time_ms", "ci95_ms", "ref_eager_ms", "ref_compile_ms", "speedup_eager",
                "speedup_compile", "floor_ms", "flags", "error"):
        assert key in verdict
    assert verdict["status"] == "unverified" and verdict["cache_hit"]
    from workbench.store import Store

    stored = Store(db).latest_evaluation(verdict["kernel_id"])
    assert stored["status"] == "unverified" and json.loads(stored["verdict"])["cache_key"]


def test_eval_command_bad_input_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["eval", "no_such_problem", "x.py", "--db",
                                       str(tmp_path / "k.db")])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "no_such_problem" in result.output


def test_empty_flags_do_not_cost_the_precompiled_header():
    from workbench.gpu.buildhook import OPT_FLAG, _listify

    # KernelBench solutions pass extra_cflags=[""]; only real flags may disable the shared PCH.
    assert _listify([""]) == [] and _listify(None) == [] and _listify("-O3") == ["-O3"]
    assert [f for f in _listify(["-O3", "", "-DX=1"]) if not OPT_FLAG.match(f)] == ["-DX=1"]
