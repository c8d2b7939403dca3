"""Static guards: read a candidate's source (Python and the CUDA/C++ inside its strings) for the
known ways generated kernels fool evaluators. Standard library only.

The rules read code, not words: Python comments and prose strings (docstrings, messages) are
blanked first, and strings holding C/C++/CUDA code keep their code but lose their own comments
and string literals (`int half = n / 2; // fp16 later` is not half precision).

Each finding is a flag {kind, reason} or a note. A flagged kernel is reported but never seeds a
round unless a human clears it; a note is shown and changes nothing (habits that are usually
honest, such as per-size buffer caches or debug printing: the dynamic checks in
workbench.gpu.evaluate decide).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

from workbench import pyast
from workbench.gpu import guards_escape

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
# Rules over code only (comments and all string literals blanked).
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
    ("io", re.compile(r"\bos\.(write|dup2?|open|pipe)\b|\bsocket\b|\bfcntl\b"),
     "writes to file descriptors or /proc: the evaluator's result channel must stay untouched"),
    ("rng", re.compile(r"manual_seed|get_rng_state|initial_seed|random\.seed|np\.random\.seed"),
     "reads or sets random seeds: inputs must stay unpredictable"),
    ("caching", re.compile(r"functools\.(lru_cache|cache)\b|@(lru_cache|cache)\b"),
     "caches results across calls: later calls may skip the work"),
]
# Rules over code and the data in its string literals (comments still blanked): paths and names
# are strings by nature.
DATA_RULES: list[tuple[str, re.Pattern, str]] = [
    ("io", re.compile(r"/proc/"),
     "writes to file descriptors or /proc: the evaluator's result channel must stay untouched"),
]
NOTE_RULES: list[tuple[str, re.Pattern, str]] = [
    ("debug_output", re.compile(r"\bsys\.std(out|err)\.write\b|\bprintf\s*\("),
     "prints while it runs (debug output costs time but is not a cheat)"),
]
# Lower precision than fp32: types, conversions and switches, never bare words. `half` and
# `half2` alone count only where they name a type (`half x`, `(half*)`, `<half>`).
LOW_PRECISION = re.compile(
    r"\b(__half2?|__nv_bfloat162?|nv_bfloat162?|__float2half\w*|__half2float|__float2bfloat16\w*|"
    r"__bfloat162float|__nv_fp8\w*)\b|"
    r"\b(torch|tl|triton\.language)\.(float16|half|bfloat16|float8\w*)\b|"
    r"\b(at|c10)::(Half|BFloat16)\b|\btorch::(kHalf|kFloat16|kBFloat16)\b|"
    r"\.(half|bfloat16)\s*\(\s*\)|\ballow_tf32\b|set_float32_matmul_precision|\bfp32_precision\b|"
    r"wmma::precision::tf32|\bmma\.sync\.\S*\.(f16|bf16|tf32)\b|"
    r"\(\s*half2?\s*\*?\s*\)|<\s*half2?\s*\*?\s*>|\bhalf2?\s*[*&]?\s+[A-Za-z_]\w*\s*[=;,\[)]")
FP8 = re.compile(r"\b(__nv_fp8\w*|float8_\w+)\b")
C_CODE = re.compile(r"__global__|#include|torch::|<<<|\bvoid\b|;\s*$|\{\s*$", re.MULTILINE)
# Inline PTX (`asm volatile("mma.sync...")`) is code in a C string: kept whole.
C_NOISE = re.compile(r'(?P<asm>\basm\s*(?:volatile\s*)?\((?:"(?:\\.|[^"\\])*"|[^"()]|\([^()]*\))*\))|'
                     r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
STRING_PARTS = re.compile(r"^([A-Za-z]*)('''|\"\"\"|'|\")(.*)\2$", re.DOTALL)


def _blank(text: str) -> str:
    """Spaces for everything but line breaks: positions and line numbers stay where they were."""
    return re.sub(r"[^\n]", " ", text)


def _code_string(token: str) -> str:
    """A Python string literal holding C/C++/CUDA: its code, with its own comments and string
    literals blanked; a prose string is blanked whole."""
    m = STRING_PARTS.match(token)
    if not m or not C_CODE.search(m.group(3)):
        return _blank(token)
    prefix, quote, body = m.groups()
    return prefix + quote + C_NOISE.sub(
        lambda c: c.group(0) if c.group("asm") else _blank(c.group(0)), body) + quote


def code_text(source: str, keep_strings: bool = False) -> str:
    """The source as the guards read it: comments blanked, and either prose strings blanked and
    C/C++ strings reduced to their code (default), or every string kept (keep_strings)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out, pos = [], 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            kind = tokenize.tok_name[tok.type]
            if kind not in ("COMMENT", "STRING", "FSTRING_MIDDLE"):
                continue
            a = starts[tok.start[0] - 1] + tok.start[1]
            b = starts[tok.end[0] - 1] + tok.end[1]
            if kind == "STRING" and keep_strings:
                continue
            out.append(source[pos:a])
            out.append(_code_string(tok.string) if kind == "STRING" else _blank(source[a:b]))
            pos = b
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the AST pass reports the syntax error; read what tokenized
    out.append(source[pos:])
    return "".join(out)


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


def _address_keyed(cls: ast.ClassDef) -> int | None:
    """Line where ModelNew reads a tensor's address or id() in Python: results keyed on them
    survive into calls with other contents at the same address."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr") or
                (isinstance(node.func, ast.Name) and node.func.id == "id")):
            return node.lineno
    return None


def _stored_per_key(cls: ast.ClassDef) -> int | None:
    """Line where ModelNew stores into a container on self outside __init__ (a per-size buffer
    cache, usually)."""
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"):
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and _dotted(t.value).startswith("self.")
                    for t in node.targets):
                return node.lineno
    return None


def _has_kernel(code: str) -> bool:
    return "__global__" in code or re.search(r"@\s*(triton\.)?jit\b", code) is not None


def review(source: str, problem_dtype: str = "float32") -> tuple[list[dict], list[dict]]:
    """(flags, notes) for a candidate source; both empty when nothing was found."""
    flags: list[dict] = []
    notes: list[dict] = []
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        return [{"kind": "syntax", "reason": f"line {e.lineno}: {e.msg}"}], []
    code = code_text(source)
    triton = re.search(r"^\s*(import|from)\s+triton\b", code, re.MULTILINE) is not None
    if not _has_kernel(code):
        _flag(flags, "no_cuda_kernel", "no `__global__` CUDA kernel or `@triton.jit` kernel "
                                       "in the candidate")
    if "load_inline" not in code and "cpp_extension" not in code and not triton:
        _flag(flags, "no_cuda_kernel", "the candidate never compiles a kernel (no load_inline, "
                                       "no Triton)")
    cls = _model_new(tree)
    if cls is not None:
        bases = [_dotted(b) for b in cls.bases]
        if any(b.split(".")[-1] == "Model" for b in bases):
            _flag(flags, "reference_reuse", f"line {cls.lineno}: ModelNew inherits the reference Model")
        work = _forward_work(cls, _extension_names(tree))
        if work:
            # With a kernel of its own, PyTorch layers kept around it are allowed (KernelBench's
            # mnist2 example): the run-time profile reports PyTorch's share of the time and
            # flags it only when PyTorch does the work.
            sink = flags if any(f["kind"] == "no_cuda_kernel" for f in flags) else notes
            _flag(sink, "pytorch_compute", "PyTorch ops do work in ModelNew: " + ", ".join(work[:6]))
        keyed = _address_keyed(cls)
        if keyed:
            _flag(flags, "caching", f"line {keyed}: keeps results keyed by tensor address or "
                                    "identity across calls: later calls may skip the work")
        stored = _stored_per_key(cls)
        if stored:
            _flag(notes, "caching", f"line {stored}: keeps tensors per key across calls (fresh "
                                    "inputs at every call decide whether results are reused)")
        for node in ast.walk(cls):
            if isinstance(node, ast.Try):
                _flag(flags, "fallback", f"line {node.lineno}: try/except in ModelNew "
                                         "(a silent fallback can hide a failing kernel)")
            if isinstance(node, ast.Call) and _dotted(node.func) in {"Model", "super().forward"}:
                _flag(flags, "reference_reuse", f"line {node.lineno}: calls the reference Model")
    for f in guards_escape.check(tree):
        _flag(flags, f["kind"], f["reason"])
    data = code_text(source, keep_strings=True)
    for text, rules, sink in ((code, TEXT_RULES, flags), (data, DATA_RULES, flags),
                              (code, NOTE_RULES, notes)):
        for kind, pattern, reason in rules:
            m = pattern.search(text)
            if m:
                _flag(sink, kind, f"line {_line_of(text, m.start())}: {reason} "
                                  f"(`{m.group(0).strip()}`)")
    lower = LOW_PRECISION if problem_dtype == "float32" else FP8
    m = lower.search(code)
    if m and problem_dtype in ("float32", "float16", "bfloat16"):
        _flag(flags, "precision", f"line {_line_of(code, m.start())}: lower precision than "
                                  f"the {problem_dtype} problem (`{m.group(0).strip()}`)")
    return flags, notes


def check(source: str, problem_dtype: str = "float32") -> list[dict]:
    """Flags for a candidate source; empty when nothing suspicious was found."""
    return review(source, problem_dtype)[0]
