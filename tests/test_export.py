"""Export: files, refusals, static extraction, the report's figures, and one real build.

The build compiles the exported extension once per test session (~1 min on 2 cores) with nvcc;
everything else is fast and needs neither nvcc nor a GPU.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench.cli import main
from workbench.cuda_env import find_cuda_home
from workbench.export import ExportError, export_kernel
from workbench.extract import ExtractError, extract_extensions
from workbench.gpu import verdict as verdict_mod
from workbench.gpu import verifier
from workbench.package import CUDA_HEADERS, cpp_unit, cuda_unit
from workbench.problems import load_problem
from workbench.store import Store

PROBLEM = '''"""y = relu(x)"""
import torch
import torch.nn as nn

FAMILY = "activation"


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return []
'''

CUDA_SRC = r'''
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void relu_launch(const float* x, float* y, long n) {
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
'''

CPP_SRC = r'''
void relu_launch(const float* x, float* y, long n);

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
'''

# A KernelBench solution: sources in variables, one joined by `+`, the name from an f-string.
CANDIDATE = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""{CUDA_SRC}"""
DECL = "void relu_launch(const float* x, float* y, long n);"
CPP_SRC = r"""{CPP_SRC.replace("void relu_launch(const float* x, float* y, long n);", "")}"""
TAG = "relu"

relu_ext = load_inline(
    name=f"{{TAG}}_ext",
    cpp_sources=DECL + CPP_SRC,
    cuda_sources=[CUDA_SRC],
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
'''

# What the verifier records load_inline received for CANDIDATE.
EXTENSION = {
    "name": "relu_ext",
    "cpp_sources": ["void relu_launch(const float* x, float* y, long n);"
                    + CPP_SRC.replace("void relu_launch(const float* x, float* y, long n);", "")],
    "cuda_sources": [CUDA_SRC], "functions": ["relu_forward"], "extra_cflags": [],
    "extra_cuda_cflags": ["-O3"], "extra_ldflags": [], "extra_include_paths": []}


def make_verdict(status: str, speedup: float | None = None, **extra) -> dict:
    v = verdict_mod.empty(status)
    v.update(verified=True, compile_s=12.5, cache_hit=False, cache_key="k",
             extensions=[EXTENSION], gpu="NVIDIA H200", trials=6, atol=1e-4, rtol=1e-4,
             max_abs_err=0.0, max_rel_err=0.0)
    if speedup is not None:
        v.update(time_ms=0.2 / speedup, ci95_ms=[0.19 / speedup, 0.21 / speedup],
                 ref_eager_ms=0.2, ref_eager_ci95_ms=[0.198, 0.202], ref_compile_ms=0.15,
                 ref_compile_ci95_ms=[0.149, 0.151], speedup_eager=speedup,
                 speedup_eager_ci95=[speedup * 0.95, speedup * 1.05],
                 speedup_compile=0.75 * speedup,
                 speedup_compile_ci95=[0.7 * speedup, 0.8 * speedup],
                 floor_ms=0.01, roofline_fraction=0.01 / (0.2 / speedup),
                 trial_errors=[{"trial": i, "distribution": "normal", "ok": True,
                                "max_abs_err": 0.0, "max_rel_err": 0.0, "reason": None}
                               for i in range(6)])
    v.update(extra)
    return v


@pytest.fixture(scope="session")
def relu_problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "relu.py"
    path.write_text(PROBLEM)
    return load_problem(path)


@pytest.fixture
def world(tmp_path, relu_problem):
    """A store with one session: round 1 seeds kernel 1, round 2 improves it into kernel 2."""
    store = Store(tmp_path / "kernels.db")
    pid = store.upsert_problem(relu_problem)
    sid = store.create_session(pid, "openai", "gpt-test", {}, env={
        "gpu": "NVIDIA H200", "driver": "580.65", "torch": "2.14.1+cu130", "cuda": "13.0"})
    r1, r2 = store.create_round(sid, 1), store.create_round(sid, 2)
    i1 = store.add_idea(r1, "a plain elementwise kernel", status="implemented")
    k1 = store.add_kernel(pid, CANDIDATE.replace("-O3", "-O2"), session_id=sid, idea_id=i1)
    verifier.record(store, k1, make_verdict("correct", 1.1))
    i2 = store.add_idea(r2, "use -O3", author="human", status="implemented", seed_kernel_id=k1)
    k2 = store.add_kernel(pid, CANDIDATE, session_id=sid, idea_id=i2, parent_id=k1)
    verifier.record(store, k2, make_verdict("correct", 1.6))
    return {"store": store, "problem_id": pid, "session_id": sid, "k1": k1, "k2": k2,
            "tmp": tmp_path}


def add_kernel(world, verdict: dict | None, source: str = CANDIDATE) -> int:
    store = world["store"]
    kid = store.add_kernel(world["problem_id"], source, session_id=world["session_id"])
    if verdict is not None:
        verifier.record(store, kid, verdict)
    return kid


def add_built_kernel(world, source: str = CANDIDATE) -> int:
    """A kernel whose build succeeded but recorded no sources (as builds before m003 did)."""
    kid = add_kernel(world, None, source)
    world["store"].add_build(kid, ok=True, seconds=10.0, cache_hit=False, cache_key="k", log="")
    return kid


# -- what export writes --------------------------------------------------------------------------

def test_export_writes_solution_sources_package_and_report(world):
    store, k2 = world["store"], world["k2"]
    out = world["tmp"] / "out"
    result = export_kernel(store, k2, out)
    module = f"kwb_relu_k{k2}"
    assert result.module == module and result.sources_from == "build" and not result.notes
    assert (out / "solution.py").read_text() == CANDIDATE
    assert (out / module / "solution.py").read_text() == CANDIDATE
    cu = (out / "csrc" / f"{module}.cu").read_text()
    assert cu.splitlines()[1:4] == CUDA_HEADERS and CUDA_SRC in cu
    cpp = (out / "csrc" / f"{module}_binding.cpp").read_text()
    assert ('m.def("relu_forward", torch::wrap_pybind_function(relu_forward), "relu_forward");'
            in cpp)
    setup = (out / "setup.py").read_text()
    assert "CUDAExtension" in setup and f'"{module}._C"' in setup and '"-O3"' in setup
    assert "--no-build-isolation" in (out / "README.md").read_text()
    # An isolated build would fetch a torch of its own: the build must not require one.
    pyproject = tomllib.loads((out / "pyproject.toml").read_text())
    assert not any("torch" in r for r in pyproject["build-system"]["requires"])
    exports = store.rows("exports")
    assert [(e["kernel_id"], e["path"]) for e in exports] == [(k2, str(out.resolve()))]
    assert result.export_id == exports[0]["id"]


def test_units_match_what_load_inline_writes(tmp_path, monkeypatch):
    """The .cpp/.cu equal the files torch's own load_inline writes for the same arguments."""
    import torch.utils.cpp_extension as ce

    monkeypatch.setattr(ce, "_jit_compile", lambda *a, **k: None)
    monkeypatch.setattr(ce, "remove_extension_h_precompiler_headers", lambda: None)
    ce.load_inline(name=EXTENSION["name"], cpp_sources=list(EXTENSION["cpp_sources"]),
                   cuda_sources=list(EXTENSION["cuda_sources"]),
                   functions=list(EXTENSION["functions"]), build_directory=str(tmp_path))
    assert (tmp_path / "main.cpp").read_text() == cpp_unit(EXTENSION)
    assert (tmp_path / "cuda.cu").read_text() == cuda_unit(EXTENSION)


def test_report_holds_the_store_figures_and_lineage(world):
    store, k1, k2 = world["store"], world["k1"], world["k2"]
    out = world["tmp"] / "out"
    export_kernel(store, k2, out)
    report = json.loads((out / "report.json").read_text())
    evaluation = store.latest_evaluation(k2)
    stored = json.loads(evaluation["verdict"])
    ev = report["evaluation"]
    for key in ("time_ms", "ci95_ms", "ref_eager_ms", "ref_eager_ci95_ms", "ref_compile_ms",
                "ref_compile_ci95_ms", "speedup_eager", "speedup_eager_ci95", "speedup_compile",
                "floor_ms", "roofline_fraction", "trial_errors"):
        assert ev[key] == stored[key], key
    assert ev["roofline_percent"] == pytest.approx(100 * stored["floor_ms"] / stored["time_ms"])
    assert ev["status"] == "correct" and ev["id"] == evaluation["id"]
    assert report["environment"] == {
        "session_id": world["session_id"], "provider": "openai", "model": "gpt-test",
        "gpu": "NVIDIA H200", "driver": "580.65", "torch": "2.14.1+cu130", "cuda": "13.0"}
    steps = report["lineage"]
    assert steps[0] == {"reference": True}
    assert [(s["kernel_id"], s["round"], s["idea"]["text"]) for s in steps[1:]] == [
        (k1, 1, "a plain elementwise kernel"), (k2, 2, "use -O3")]
    assert [s["speedup_eager"] for s in steps[1:]] == [1.1, 1.6]
    md = (out / "report.md").read_text()
    assert "use -O3" in md and "1.600x" in md and "580.65" in md and "2.14.1+cu130" in md


# -- refusals ------------------------------------------------------------------------------------

def test_refuses_to_overwrite_without_force(world):
    out = world["tmp"] / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(ExportError, match="not empty.*--force"):
        export_kernel(world["store"], world["k2"], out)
    assert not (out / "solution.py").exists()
    export_kernel(world["store"], world["k2"], out, force=True)
    assert (out / "solution.py").read_text() == CANDIDATE
    assert (out / "mine.txt").read_text() == "keep"


@pytest.mark.parametrize("status,cleared,why", [
    ("incorrect", False, "latest evaluation is incorrect"),
    ("compile_error", False, "latest evaluation is compile_error"),
    ("flagged", False, "flagged \\(faster than the roofline floor\\) and not cleared"),
    (None, False, "never been evaluated"),
])
def test_refuses_unverified_kernels(world, status, cleared, why):
    verdict = None if status is None else make_verdict(
        status, 50.0, flags=[{"kind": "floor", "reason": "faster than the roofline floor"}])
    kid = add_kernel(world, verdict)
    out = world["tmp"] / "out"
    with pytest.raises(ExportError, match=why) as e:
        export_kernel(world["store"], kid, out)
    assert "\n" not in str(e.value)
    assert not out.exists()
    if status in (None, "compile_error"):
        # Nothing that never compiled leaves, whatever the caller allows.
        assert not e.value.overridable
        with pytest.raises(ExportError, match="never compiled"):
            export_kernel(world["store"], kid, out, allow_unverified=True)
        assert not out.exists()
        return
    assert e.value.overridable
    result = export_kernel(world["store"], kid, out, allow_unverified=True)
    assert result.notes[0].startswith("exported without verification")
    assert (out / "solution.py").exists()


def test_cleared_flag_exports(world):
    kid = add_kernel(world, make_verdict("flagged", 50.0, flags=[{"kind": "floor", "reason": "x"}]))
    world["store"].set_kernel_flags(kid, cleared=True)
    result = export_kernel(world["store"], kid, world["tmp"] / "out")
    assert not result.notes


def test_latest_evaluation_decides(world):
    kid = add_kernel(world, make_verdict("correct", 1.2))
    verifier.record(world["store"], kid, make_verdict("incorrect"))
    with pytest.raises(ExportError, match="incorrect"):
        export_kernel(world["store"], kid, world["tmp"] / "out")


def test_unknown_kernel(world):
    with pytest.raises(ExportError, match="kernel 999: no such kernel"):
        export_kernel(world["store"], 999, world["tmp"] / "out")


# -- static extraction fallback ------------------------------------------------------------------

def test_extract_resolves_variables_concatenation_and_fstrings():
    assert extract_extensions(CANDIDATE) == [EXTENSION]


def test_extract_positional_arguments_and_function_scope():
    source = '''
import torch.utils.cpp_extension as ce
def build():
    src = "int f();"
    return ce.load_inline("pos_ext", src, None, None, {"f": "doc"})
'''
    [ext] = extract_extensions(source)
    assert ext["name"] == "pos_ext" and ext["cpp_sources"] == ["int f();"]
    assert ext["cuda_sources"] == [] and ext["functions"] == {"f": "doc"}
    assert 'm.def("f", torch::wrap_pybind_function(f), "doc");' in cpp_unit(ext)


def test_extract_reports_what_it_cannot_resolve():
    source = 'from torch.utils.cpp_extension import load_inline\n' \
             'N = 128\nm = load_inline(name="e", cpp_sources="", cuda_sources=f"#define N {N:d}")\n'
    with pytest.raises(ExtractError, match=r"<kernel>:3: load_inline's cuda_sources .*format spec"):
        extract_extensions(source)
    assert extract_extensions("import torch\n") == []


def test_export_without_recorded_sources_reads_them_statically(world):
    kid = add_built_kernel(world)
    result = export_kernel(world["store"], kid, world["tmp"] / "out", allow_unverified=True)
    assert result.sources_from == "static" and result.module == f"kwb_relu_k{kid}"
    cu = (world["tmp"] / "out" / "csrc" / f"{result.module}.cu").read_text()
    assert cu.split("\n", 1)[1] == cuda_unit(EXTENSION) + "\n"


def test_export_of_unresolvable_source_keeps_solution_and_says_why(world):
    source = CANDIDATE.replace('cuda_sources=[CUDA_SRC]', 'cuda_sources=[open("k.cu").read()]')
    kid = add_built_kernel(world, source)
    out = world["tmp"] / "out"
    result = export_kernel(world["store"], kid, out, allow_unverified=True)
    assert result.module is None and not (out / "setup.py").exists()
    assert (out / "solution.py").read_text() == source
    assert any("cannot be read statically (a Call expression)" in n for n in result.notes)


# -- the command ---------------------------------------------------------------------------------

def test_cli_export_and_refusal(world):
    db, out = str(world["store"].path), str(world["tmp"] / "out")
    runner = CliRunner()
    ok = runner.invoke(main, ["export", str(world["k2"]), "--out", out, "--db", db])
    assert ok.exit_code == 0, ok.output
    assert f"import kwb_relu_k{world['k2']}" in ok.output
    again = runner.invoke(main, ["export", str(world["k2"]), "--out", out, "--db", db])
    assert again.exit_code == 2
    assert again.output.count("\n") == 1 and again.output.startswith("error: ")
    missing = runner.invoke(main, ["export", "1", "--out", out, "--db", str(world["tmp"] / "x.db")])
    assert missing.exit_code == 2 and "no workbench database" in missing.output


def test_cli_export_takes_the_apps_kernel_names_and_says_how_to_override(world):
    db, runner = str(world["store"].path), CliRunner()
    ok = runner.invoke(main, ["export", f"k{world['k2']}", "--out", str(world["tmp"] / "a"),
                              "--db", db])
    assert ok.exit_code == 0, ok.output
    for bad in ("kk2", "k-1", "0", str(2**63), "99999999999999999999999"):
        result = runner.invoke(main, ["export", bad, "--out", str(world["tmp"] / "b"), "--db", db])
        assert result.exit_code == 2 and "is not a kernel id" in result.output, result.output
        assert "Traceback" not in result.output
    kid = add_kernel(world, make_verdict("incorrect"))
    refused = runner.invoke(main, ["export", str(kid), "--out", str(world["tmp"] / "c"),
                                   "--db", db])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1
    assert "pass --allow-unverified to export it anyway" in refused.output
    never = add_kernel(world, make_verdict("compile_error"))
    refused = runner.invoke(main, ["export", str(never), "--out", str(world["tmp"] / "d"),
                                   "--db", db, "--allow-unverified"])
    assert refused.exit_code == 2 and "never compiled" in refused.output
    assert "--allow-unverified" not in refused.output


# -- the real build (once per session) -----------------------------------------------------------

@pytest.fixture(scope="session")
def built_package(tmp_path_factory, relu_problem):
    """Export kernel 2 of a fresh world and pip-install it into a target dir, once."""
    home = find_cuda_home()
    if home is None:
        pytest.skip("no CUDA toolkit (nvcc) found: cannot build the exported extension")
    tmp = tmp_path_factory.mktemp("build")
    store = Store(tmp / "kernels.db")
    pid = store.upsert_problem(relu_problem)
    kid = store.add_kernel(pid, CANDIDATE)
    verifier.record(store, kid, make_verdict("correct", 1.5))
    result = export_kernel(store, kid, tmp / "export")
    env = dict(os.environ)
    env.setdefault("CUDA_HOME", str(home))  # /usr/local/bin/nvcc makes torch guess /usr/local
    env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # one arch; without a GPU torch builds all
    env.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
    site = tmp / "site"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
         "--no-index", "--target", str(site), str(result.out_dir)],
        capture_output=True, text=True, env=env, timeout=900)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    print(f"\nexported extension built in {seconds:.1f} s")
    return {"site": site, "module": result.module, "seconds": seconds, "env": env}


def run_in_site(built, code: str) -> subprocess.CompletedProcess:
    env = dict(built["env"], PYTHONPATH=str(built["site"]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300, cwd=built["site"].parent)


def test_exported_extension_builds_and_imports(built_package):
    module = built_package["module"]
    assert list((built_package["site"] / module).glob("_C*.so"))
    proc = run_in_site(built_package, f"import {module} as m; print(m.relu_forward.__doc__); "
                                      "print(m.ModelNew.__name__)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.split()
    assert "relu_forward" in lines[0] and lines[-1] == "ModelNew"


@pytest.mark.gpu
def test_installed_model_matches_reference(built_package):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    module = built_package["module"]
    proc = run_in_site(built_package, f"""
import torch, {module} as m
x = torch.randn(4096, 1024, device="cuda")
y = m.ModelNew()(x)
torch.cuda.synchronize()
assert torch.equal(y, torch.relu(x)), "mismatch"
print("ok")
""")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


@pytest.mark.gpu
def test_exported_solution_evaluates_the_same(world, relu_problem):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from workbench.gpu.executor import EvalSettings
    from workbench.gpu.pool import LocalPool

    out = world["tmp"] / "out"
    export_kernel(world["store"], world["k2"], out)
    exported = (out / "solution.py").read_text()
    pool = LocalPool(gpus=None)
    try:
        original, again = (
            pool.submit(verifier.request_for(relu_problem, source, EvalSettings())).result()
            for source in (CANDIDATE, exported))
    finally:
        pool.shutdown()
    assert original["status"] == again["status"] == "correct"
    assert again["max_abs_err"] == original["max_abs_err"]
    assert [f["kind"] for f in again["flags"]] == [f["kind"] for f in original["flags"]]
