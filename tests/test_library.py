"""The problem library: every problems/*.py is a well-formed, CPU-smoke-runnable KernelBench problem.

CPU only. Full-size inputs are only ever built on the meta device (shapes, no memory).
"""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from workbench.gpu.compare import compare

PROBLEMS_DIR = Path(__file__).resolve().parent.parent / "problems"
PROBLEM_FILES = sorted(p for p in PROBLEMS_DIR.glob("*.py") if p.name != "__init__.py")

FAMILIES = {"activation", "reduction", "normalization", "pooling", "matmul", "convolution",
            "loss", "scan", "fused"}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
DEFAULT_TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}

# Ceilings from DESIGN.md (H200): fp32 matmul without TF32, device copy bandwidth.
COMPUTE_FLOPS_PER_S = 51.1e12
BANDWIDTH_BYTES_PER_S = 4.24e12
MIN_FLOOR_MS = 0.05
MAX_FOOTPRINT_BYTES = 6 * 2**30  # inputs + outputs + params; intermediates need the rest of ~8 GB

# Roofline floors of the CRFM fast-kernels problems (DESIGN.md reference table).
CRFM_FLOORS_MS = {
    "matmul_fp32": 2.69,
    "conv2d": 0.413,
    "softmax": 0.506,
    "layernorm": 0.127,
    "conv2d_relu_maxpool": 0.413,
}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"library_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MODULES: dict[str, object] = {}


def problem(path: Path):
    if path.stem not in _MODULES:
        _MODULES[path.stem] = load(path)
    return _MODULES[path.stem]


def as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def tolerance(mod) -> tuple[float, float]:
    default = DEFAULT_TOL[mod.DTYPE]
    return getattr(mod, "ATOL", default), getattr(mod, "RTOL", default)


def floor_ms(mod) -> float:
    return max(mod.FLOPS / COMPUTE_FLOPS_PER_S, mod.MIN_BYTES / BANDWIDTH_BYTES_PER_S) * 1e3


def perturbed(inputs, fn):
    return [fn(t) if t.is_floating_point() else t for t in inputs]


ids = [p.stem for p in PROBLEM_FILES]


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=ids)
def test_metadata(path):
    mod = problem(path)
    doc = (mod.__doc__ or "").strip()
    assert doc and "\n" not in doc, "module docstring must be one line describing the problem"
    assert path.stem.isidentifier() and path.stem == path.stem.lower()
    assert mod.FAMILY in FAMILIES
    assert mod.DTYPE in DTYPES
    for name in ("FLOPS", "MIN_BYTES"):
        value = getattr(mod, name)
        assert type(value) is int, f"{name} must be an int"
        assert value > 0, f"{name} must be positive"
    atol, rtol = tolerance(mod)
    assert 0 < atol <= 0.1 and 0 < rtol <= 0.1
    for name in ("Model", "get_inputs", "get_init_inputs", "get_smoke_inputs"):
        assert callable(getattr(mod, name))


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=ids)
def test_source_rules(path):
    source = path.read_text()
    for banned in (".cuda(", "device=", "manual_seed", "dropout", "Dropout"):
        assert banned not in source, f"{banned!r} not allowed in a problem file"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=ids)
def test_smoke_run(path):
    mod = problem(path)
    atol, rtol = tolerance(mod)
    model = mod.Model(*mod.get_init_inputs())
    inputs = mod.get_smoke_inputs()
    assert isinstance(inputs, list) and all(isinstance(t, torch.Tensor) for t in inputs)
    start = time.perf_counter()
    with torch.no_grad():
        outs = as_list(model(*[t.clone() for t in inputs]))
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"smoke run took {elapsed:.2f} s"
    with torch.no_grad():
        again = as_list(model(*[t.clone() for t in inputs]))
    for out, out2 in zip(outs, again):
        assert isinstance(out, torch.Tensor)
        assert torch.isfinite(out).all()
        if out.is_floating_point():
            assert out.dtype == DTYPES[mod.DTYPE]
        assert torch.equal(out, out2), "forward is not deterministic"
        assert compare(out, out, atol, rtol).ok
        assert not compare(torch.zeros_like(out), out, atol, rtol).ok, \
            "an all-zeros answer passes the check"
    # The verifier's extra trials scale and shift the inputs (workbench/gpu/inputs.py): outputs must
    # stay finite there, and for margin under larger shifts too.
    for fn in (lambda t: t * 10, lambda t: t + t.abs().mean(), lambda t: t + 3, lambda t: t - 3):
        with torch.no_grad():
            for out in as_list(model(*perturbed(inputs, fn))):
                assert torch.isfinite(out).all()


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=ids)
def test_full_size_on_meta(path):
    mod = problem(path)
    with torch.device("meta"), torch.no_grad():
        inputs = mod.get_inputs()
        assert isinstance(inputs, list) and inputs
        assert all(isinstance(t, torch.Tensor) and t.is_meta for t in inputs)
        model = mod.Model(*mod.get_init_inputs())
        outs = as_list(model(*inputs))
    assert outs and all(isinstance(t, torch.Tensor) for t in outs)
    for out in outs:
        if out.is_floating_point():
            assert out.dtype == DTYPES[mod.DTYPE]
    state = list(model.parameters()) + list(model.buffers())
    moved = nbytes(inputs) + nbytes(outs) + nbytes(state)
    assert mod.MIN_BYTES >= moved, f"MIN_BYTES {mod.MIN_BYTES} < inputs+outputs+params {moved}"
    assert mod.MIN_BYTES <= 1.05 * moved, "MIN_BYTES counts more than one pass over the data"
    assert moved <= MAX_FOOTPRINT_BYTES, f"{moved / 2**30:.2f} GiB of inputs, outputs, params"


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=ids)
def test_floor_is_big_enough(path):
    mod = problem(path)
    assert floor_ms(mod) >= MIN_FLOOR_MS, f"floor {floor_ms(mod):.3f} ms: problem too small"


def test_library_coverage():
    mods = {p.stem: problem(p) for p in PROBLEM_FILES}
    assert len(mods) >= 20
    assert set(CRFM_FLOORS_MS) <= set(mods)
    families = [m.FAMILY for m in mods.values()]
    assert families.count("fused") >= 3
    assert set(families) == FAMILIES


@pytest.mark.parametrize("name", sorted(CRFM_FLOORS_MS))
def test_crfm_floors_match_design(name):
    mod = problem(PROBLEMS_DIR / f"{name}.py")
    expected = CRFM_FLOORS_MS[name]
    assert abs(floor_ms(mod) - expected) <= 0.15 * expected, \
        f"{name}: floor {floor_ms(mod):.3f} ms, DESIGN.md says {expected}"
