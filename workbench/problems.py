"""Load and validate problems in the KernelBench file format.

A problem file defines `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`. Ours also
declare FAMILY, DTYPE, FLOPS, MIN_BYTES (and optionally ATOL/RTOL and `get_smoke_inputs()`); for
files that don't (KernelBench's own), FLOPs and bytes are derived from the shapes on the meta
device, so nothing is allocated and a 4096x65536 problem inspects in milliseconds.
"""
from __future__ import annotations

import difflib
import hashlib
import importlib.resources
import types
from dataclasses import dataclass, field
from pathlib import Path

VARIANTS = ("default", "scaled", "shifted")  # input variants a problem may allow (INPUT_VARIANTS)
DEFAULT_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-7}
FAMILIES = ("activation", "reduction", "normalization", "pooling", "matmul", "convolution",
            "loss", "scan", "fused")


class ProblemError(Exception):
    """A problem file that cannot be used; str() is one line naming the file and what to do."""


@dataclass
class Problem:
    name: str
    path: Path
    source: str
    hash: str
    family: str
    dtype: str
    atol: float
    rtol: float
    flops: int | None
    min_bytes: int
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)
    description: str = ""

    def summary(self) -> dict:
        return {"name": self.name, "family": self.family, "dtype": self.dtype,
                "inputs": [list(s) for s in self.input_shapes], "input_dtypes": self.input_dtypes,
                "outputs": [list(s) for s in self.output_shapes], "flops": self.flops,
                "min_bytes": self.min_bytes, "atol": self.atol, "rtol": self.rtol,
                "path": str(self.path), "description": self.description}


def library_dir() -> Path:
    try:
        return Path(str(importlib.resources.files("workbench.library")))
    except ModuleNotFoundError:  # running from a source checkout that was never installed
        return Path(__file__).resolve().parent.parent / "problems"


def library_paths() -> list[Path]:
    return sorted(p for p in library_dir().glob("*.py") if not p.name.startswith("_"))


def resolve(name_or_path: str | Path) -> Path:
    """A path to a problem file from a library name ("softmax") or a file path."""
    p = Path(name_or_path)
    if p.suffix == ".py" or p.exists():
        if not p.is_file():
            raise ProblemError(f"{p}: no such problem file")
        return p
    candidate = library_dir() / f"{name_or_path}.py"
    if candidate.is_file():
        return candidate
    close = difflib.get_close_matches(str(name_or_path), [p.stem for p in library_paths()], n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ProblemError(f"{name_or_path}: no problem of that name in the library and no such file "
                       f"({hint}`kernel-workbench problems` lists the library)")


def _one_line(e: BaseException) -> str:
    """An exception as `Type: message` on one line (torch and user errors often span several)."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def exec_source(source: str, filename: str, module_name: str = "problem") -> types.ModuleType:
    """Execute problem source as a fresh module; raises ProblemError with one line on failure."""
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        raise ProblemError(f"{filename}:{e.lineno}: syntax error: {e.msg}") from None
    module = types.ModuleType(module_name)
    module.__file__ = filename
    try:
        exec(code, module.__dict__)
    except ModuleNotFoundError as e:
        raise ProblemError(f"{filename}: needs the Python package `{e.name}`, which is not "
                           f"installed here (pip install {e.name})") from None
    except Exception as e:  # noqa: BLE001 - any failure in user code becomes one line
        raise ProblemError(f"{filename}: importing failed: {_one_line(e)}") from None
    return module


def _tensors(value) -> list:
    import torch

    items = value if isinstance(value, (list, tuple)) else [value]
    return [t for t in items if isinstance(t, torch.Tensor)]


def _call(fn, what: str, filename: str, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        raise ProblemError(f"{filename}: {what} raised {_one_line(e)}") from None


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _model_on(device: str, mod, init, filename: str):
    import torch

    with torch.device(device), torch.no_grad():
        return _call(lambda: mod.Model(*init), "Model(*get_init_inputs())", filename)


def _build_model(mod, init, filename: str):
    """The model with meta parameters. Built on the meta device (no memory) unless the
    constructor needs real values (Swin's `.item()`): then on the CPU, else the GPU, and moved
    to meta afterwards."""
    import torch

    try:
        return _model_on("meta", mod, init, filename)
    except ProblemError as meta_error:
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            try:
                return _model_on(device, mod, init, filename).to("meta")
            except ProblemError:
                continue
        raise meta_error from None


def _recurrent_shapes(module, x, hx=None):
    """Outputs of nn.RNN/LSTM/GRU as empty meta tensors, and their FLOPs. PyTorch's meta path
    unrolls every time step through Python (35 s for a 512-step, 6-layer LSTM)."""
    import torch

    gates = {"LSTM": 4, "GRU": 3}.get(type(module).__name__, 1)
    d = 2 if module.bidirectional else 1
    h = module.hidden_size
    h_out = getattr(module, "proj_size", 0) or h
    if x.dim() == 2:  # unbatched (seq, features)
        seq, batch, out_shape, state = x.shape[0], 1, (x.shape[0], d * h_out), (d * module.num_layers,)
    elif module.batch_first:
        batch, seq = x.shape[:2]
        out_shape, state = (batch, seq, d * h_out), (d * module.num_layers, batch)
    else:
        seq, batch = x.shape[:2]
        out_shape, state = (seq, batch, d * h_out), (d * module.num_layers, batch)
    flops = sum(2 * seq * batch * gates * h * d *
                ((module.input_size if layer == 0 else d * h_out) + h_out)
                for layer in range(module.num_layers))

    def empty(*shape):
        return torch.empty(shape, device="meta", dtype=x.dtype)

    h_n = empty(*state, h_out)
    if gates == 4:
        return (empty(*out_shape), (h_n, empty(*state, h))), flops
    return (empty(*out_shape), h_n), flops


def _describe(mod, filename: str) -> tuple[list, list, int]:
    """(inputs, outputs, counted FLOPs) from shapes on the meta device: no memory, no compute.
    Outputs are [] where an op has no meta kernel."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"), torch.no_grad():
        init = _call(mod.get_init_inputs, "get_init_inputs()", filename)
        inputs = _call(mod.get_inputs, "get_inputs()", filename)
    if not isinstance(inputs, (list, tuple)) or not _tensors(inputs):
        raise ProblemError(f"{filename}: get_inputs() must return a list holding tensors")
    model = _build_model(mod, init, filename)
    recurrent_flops = []

    def shapes_only(module, fwd):
        def forward(x, *args, **kwargs):
            if not isinstance(x, torch.Tensor):
                return fwd(x, *args, **kwargs)  # packed sequences: PyTorch's own path
            result, flops = _recurrent_shapes(module, x, *args, **kwargs)
            recurrent_flops.append(flops)
            return result
        return forward

    for m in model.modules():
        if isinstance(m, torch.nn.RNNBase):
            m.forward = shapes_only(m, m.forward)  # this model instance is ours alone
    counter = FlopCounterMode(display=False)
    try:
        with torch.device("meta"), torch.no_grad(), counter:
            outputs = _tensors(model(*inputs))
    except Exception:  # noqa: BLE001 - some ops have no meta kernel; shapes are then unknown
        outputs = []
    return list(inputs), outputs, counter.get_total_flops() + sum(recurrent_flops)


def load_problem(name_or_path: str | Path, smoke: bool = True) -> Problem:
    """Load, validate and describe a problem. Raises ProblemError (one line) when unusable.

    The file is code: it runs in a child process with a time limit (workbench.problem_loader),
    so an endless loop, an exit or a crash at import is one line here, not a hang or a silent
    end of the caller.
    """
    from workbench import problem_loader

    path = resolve(name_or_path)
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"{path}: cannot read: {e}") from None
    fields = problem_loader.load(path, source, smoke)
    for key in ("input_shapes", "output_shapes"):
        fields[key] = [tuple(shape) for shape in fields[key]]
    return Problem(path=path, source=source, **fields)


def inspect_problem(path: Path, source: str, smoke: bool = True) -> Problem:
    """Execute, validate and describe a problem in this process (the loader's child does)."""
    import torch

    filename = str(path)
    mod = exec_source(source, filename)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, attr):
            raise ProblemError(f"{filename}: missing `{attr}` (a KernelBench problem defines "
                               "class Model, get_inputs() and get_init_inputs())")
    if not (isinstance(mod.Model, type) and issubclass(mod.Model, torch.nn.Module)):
        raise ProblemError(f"{filename}: `Model` must be a torch.nn.Module subclass")

    inputs, outputs, counted_flops = _describe(mod, filename)
    in_tensors = _tensors(inputs)
    floating = [t for t in in_tensors if t.is_floating_point()]
    dtype = getattr(mod, "DTYPE", None) or (str(floating[0].dtype).removeprefix("torch.")
                                            if floating else "float32")
    default_tol = DEFAULT_TOLERANCE.get(dtype, 1e-4)
    flops = getattr(mod, "FLOPS", None)
    if flops is None and counted_flops:
        flops = int(counted_flops)
    min_bytes = getattr(mod, "MIN_BYTES", None)
    if min_bytes is None:
        # What must move whatever the kernel: inputs read once, outputs written once. Weights
        # are left out: a kernel may fold them into something smaller when it is built.
        min_bytes = _nbytes(in_tensors) + _nbytes(outputs)
    variants = getattr(mod, "INPUT_VARIANTS", None)
    if variants is not None and (not isinstance(variants, (list, tuple)) or
                                 "default" not in variants or not set(variants) <= set(VARIANTS)):
        raise ProblemError(f"{filename}: INPUT_VARIANTS must list \"default\" and any of "
                           f"{', '.join(VARIANTS[1:])} (got {variants!r})")
    family = getattr(mod, "FAMILY", None) or "unknown"

    if smoke and hasattr(mod, "get_smoke_inputs"):
        with torch.no_grad():
            small = _call(mod.get_smoke_inputs, "get_smoke_inputs()", filename)
            model = _call(lambda: mod.Model(*mod.get_init_inputs()), "Model(*get_init_inputs())",
                          filename)
            out = _call(model, "Model.forward on the smoke inputs", filename, *small)
            if not all(bool(torch.isfinite(t).all()) for t in _tensors(out) if t.is_floating_point()):
                raise ProblemError(f"{filename}: Model gives NaN/inf on the smoke inputs")

    doc = (mod.__doc__ or "").strip().splitlines()
    return Problem(
        name=path.stem, path=path, source=source, hash=hashlib.sha256(source.encode()).hexdigest(),
        family=family, dtype=dtype, atol=float(getattr(mod, "ATOL", default_tol)),
        rtol=float(getattr(mod, "RTOL", default_tol)), flops=flops, min_bytes=int(min_bytes),
        input_shapes=[tuple(t.shape) for t in in_tensors],
        input_dtypes=[str(t.dtype).removeprefix("torch.") for t in in_tensors],
        output_shapes=[tuple(t.shape) for t in outputs], description=doc[0] if doc else "")
