"""Static guards: read a candidate's source (Python and the CUDA/C++ inside its strings) for the
known ways generated kernels fool evaluators. Standard library only.

Each finding is a flag {kind, reason}; a flagged kernel is reported but never seeds a round
unless a human clears it. The dynamic guards (workbench.gpu.evaluate) back these up at run time.
"""
from __future__ import annotations

import ast
import re

# torch calls that do real work (as opposed to allocating, viewing or moving tensors).
HEAVY_TORCH = {
    "matmul", "mm", "bmm", "einsum", "addmm", "baddbmm", "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "softmax", "log_softmax",
    "layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm", "cumsum", "cumprod",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool2d", "sum", "mean", "amax", "amin", "var", "std", "norm", "logsumexp",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "kl_div", "smooth_l1_loss",
    "scaled_dot_product_attention", "gelu", "silu", "relu", "sigmoid", "tanh", "elu",
    "leaky_relu", "softplus", "hardtanh", "mish", "selu", "prod", "argmax", "argmin", "sort",
    "topk", "tensordot", "outer", "dot", "mv", "cdist", "triu", "tril",
}
HEAVY_MODULES = {
    "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm",
    "InstanceNorm2d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
    "AvgPool3d", "Softmax", "LogSoftmax", "MultiheadAttention", "RMSNorm", "GELU", "ReLU",
    "SiLU", "Sigmoid", "Tanh", "CrossEntropyLoss", "MSELoss", "KLDivLoss", "Transformer",
}
TEXT_RULES: list[tuple[str, re.Pattern, str]] = [
    ("side_stream", re.compile(r"torch\.cuda\.(Stream|stream)\b|cudaStreamCreate|getStreamFromPool|"
                               r"cudaStreamPerThread|cudaLaunchHostFunc|cudaStreamAddCallback"),
     "uses a CUDA stream other than the current one: work there escapes the timing events"),
    ("threads", re.compile(r"^\s*(import|from)\s[^\n]*\b(threading|multiprocessing|concurrent|"
                           r"asyncio|subprocess)\b|std::thread|std::async|pthread_create|os\.fork\b",
                           re.MULTILINE),
     "starts threads or processes: work can continue after the timed call returns"),
    ("patching", re.compile(r"\bsetattr\s*\(\s*(torch|time|statistics|builtins|sys)\b|"
                            r"^\s*(torch|time|statistics|triton|sys|builtins)(\.\w+)+\s*=[^=]|"
                            r"\bimport\s+(builtins|gc|inspect|ctypes|importlib)\b|"
                            r"\bfrom\s+(builtins|gc|inspect|ctypes|importlib)\b|sys\.modules|"
                            r"sys\._getframe|__builtins__|__import__\s*\(|\bglobals\s*\(\s*\)",
                            re.MULTILINE),
     "patches or introspects the runtime (timers, torch, modules, frames)"),
    ("tensor_subclass", re.compile(r"class\s+\w+\s*\(\s*(torch\.)?Tensor\s*\)|__torch_function__|"
                                   r"__torch_dispatch__|_make_subclass|_make_wrapper_subclass|"
                                   r"\.as_subclass\s*\("),
     "defines a tensor subclass or dispatch hook: outputs can be lazy or fake"),
    ("io", re.compile(r"\bos\.(write|dup2?|open|pipe)\b|/proc/|\bsocket\b|\bfcntl\b|sys\.std(out|err)\.write"),
     "writes to file descriptors or /proc: the evaluator's result channel must stay untouched"),
    ("rng", re.compile(r"manual_seed|get_rng_state|initial_seed|random\.seed|np\.random\.seed"),
     "reads or sets random seeds: inputs must stay unpredictable"),
    ("caching", re.compile(r"functools\.(lru_cache|cache)\b|@(lru_cache|cache)\b"),
     "caches results across calls: later calls may skip the work"),
]
LOW_PRECISION = re.compile(r"\b(half2?|__half2?|__float2half\w*|__nv_bfloat16\w*|bfloat16|float16|"
                           r"__float2bfloat16\w*|fp16|bf16|tf32|__nv_fp8\w*|fp8)\b|allow_tf32|"
                           r"\.half\(\)|set_float32_matmul_precision|wmma::precision|"
                           r"\bmma\.sync\.\S*\.(f16|bf16|tf32)", re.IGNORECASE)


def _flag(flags: list[dict], kind: str, reason: str) -> None:
    if not any(f["kind"] == kind for f in flags):
        flags.append({"kind": kind, "reason": reason})


def _line_of(source: str, pos: int) -> int:
    return source.count("\n", 0, pos) + 1


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)


def _extension_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to what load_inline/load returned (calls on them are the kernel)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                _dotted(node.value.func).split(".")[-1] in {"load_inline", "load"}:
            names.update(_dotted(t) for t in node.targets)
    return names


def _forward_work(cls: ast.ClassDef, extensions: set[str]) -> list[str]:
    """Heavy torch calls, `@`, and calls of nn layers inside ModelNew's methods (not __init__)."""
    layers = set()
    found = []
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if fn.name == "__init__" and isinstance(node, ast.Assign) and \
                    isinstance(node.value, ast.Call):
                if _dotted(node.value.func).split(".")[-1] in HEAVY_MODULES:
                    layers.update(_dotted(t) for t in node.targets)
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"):
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                found.append(f"line {node.lineno}: `@`")
            elif isinstance(node, ast.Call):
                name = _dotted(node.func)
                head, _, last = name.rpartition(".")
                torchy = head.split(".")[0] in {"torch", "F", "nn", "functional"} if head else False
                if (torchy and last in HEAVY_TORCH) or name in layers:
                    found.append(f"line {node.lineno}: {name}()")
                elif head and not torchy and last in HEAVY_TORCH and "." not in head and \
                        head != "self" and head not in extensions:
                    # x.sum(), x.softmax(...): tensor methods doing the work.
                    found.append(f"line {node.lineno}: .{last}()")
    return found


def _memoization(cls: ast.ClassDef) -> int | None:
    """Line of a Python-side cache in ModelNew: tensor addresses or id() read in Python, or
    results stored into a container on self outside __init__."""
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr") or
                    (isinstance(node.func, ast.Name) and node.func.id == "id")):
                return node.lineno
            if fn.name != "__init__" and isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and _dotted(t.value).startswith("self.")
                    for t in node.targets):
                return node.lineno
    return None


def check(source: str, problem_dtype: str = "float32") -> list[dict]:
    """Flags for a candidate source; empty when nothing suspicious was found."""
    flags: list[dict] = []
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [{"kind": "syntax", "reason": f"line {e.lineno}: {e.msg}"}]
    if "__global__" not in source:
        _flag(flags, "no_cuda_kernel", "no `__global__` CUDA kernel in the candidate")
    if "load_inline" not in source and "cpp_extension" not in source:
        _flag(flags, "no_cuda_kernel", "the candidate never compiles CUDA (no load_inline)")
    cls = _model_new(tree)
    if cls is not None:
        bases = [_dotted(b) for b in cls.bases]
        if any(b.split(".")[-1] == "Model" for b in bases):
            _flag(flags, "reference_reuse", f"line {cls.lineno}: ModelNew inherits the reference Model")
        work = _forward_work(cls, _extension_names(tree))
        if work:
            _flag(flags, "pytorch_compute",
                  "PyTorch ops do work in ModelNew: " + ", ".join(work[:6]))
        memo = _memoization(cls)
        if memo:
            _flag(flags, "caching", f"line {memo}: keeps results keyed by tensor address, "
                                    "identity or shape across calls: later calls may skip the work")
        for node in ast.walk(cls):
            if isinstance(node, ast.Try):
                _flag(flags, "fallback", f"line {node.lineno}: try/except in ModelNew "
                                         "(a silent fallback can hide a failing kernel)")
            if isinstance(node, ast.Call) and _dotted(node.func) in {"Model", "super().forward"}:
                _flag(flags, "reference_reuse", f"line {node.lineno}: calls the reference Model")
    for kind, pattern, reason in TEXT_RULES:
        m = pattern.search(source)
        if m:
            _flag(flags, kind, f"line {_line_of(source, m.start())}: {reason} (`{m.group(0).strip()}`)")
    if problem_dtype == "float32":
        m = LOW_PRECISION.search(source)
        if m:
            _flag(flags, "precision", f"line {_line_of(source, m.start())}: lower precision than "
                                      f"the fp32 problem (`{m.group(0)}`)")
    return flags
