"""Guards that watch the candidate while it runs. Imports only torch and the standard library."""
from __future__ import annotations

import math
import re
import statistics
import threading
import time

import torch

GLOBAL_NAME = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?(?:\w+\s+)*?(\w+)\s*(?:<[^>]*>)?\s*\(")
# Kernels PyTorch, cuBLAS, cuDNN or Triton run on the candidate's behalf. The sure markers are
# checked before the candidate's own names (at::native's SiLU kernel is called silu_kernel too).
# torch.compile's Triton kernels are triton_poi_/red_/per_/tem_...; a candidate's own Triton
# kernels carry the names of its @triton.jit functions.
LIBRARY_SURE = re.compile(r"at::native|at::cuda|cutlass|cublas|cudnn|xmma|\btriton_(?:poi|red|per|tem|for|unk)_",
                          re.IGNORECASE)
TRITON_JIT = re.compile(r"@\s*(?:triton\.)?jit\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")
LIBRARY_LIKELY = re.compile(r"gemm|sm\d+_|implicit_convolve|winograd|fft", re.IGNORECASE)


def watched_objects() -> dict[str, object]:
    """Everything the harness relies on to check and time; a candidate that replaces any of
    these is patching the evaluator."""
    objs = {
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.current_stream": torch.cuda.current_stream,
        "torch.equal": torch.equal, "torch.isfinite": torch.isfinite,
        "torch.roll": torch.roll, "torch.full": torch.full, "torch.manual_seed": torch.manual_seed,
        "torch.Tensor.clone": torch.Tensor.clone, "torch.Tensor.abs": torch.Tensor.abs,
        "torch.Tensor.to": torch.Tensor.to, "torch.Tensor.__sub__": torch.Tensor.__sub__,
        "torch.Tensor.__gt__": torch.Tensor.__gt__, "torch.Tensor.max": torch.Tensor.max,
        "torch.Tensor.any": torch.Tensor.any, "torch.Tensor.all": torch.Tensor.all,
        "torch.Tensor.pow": torch.Tensor.pow, "torch.Tensor.mean": torch.Tensor.mean,
        "torch.nn.Module.__call__": torch.nn.Module.__call__,
        "time.perf_counter": time.perf_counter, "time.time": time.time,
        "statistics.median": statistics.median, "math.sqrt": math.sqrt,
        "threading.Thread.start": threading.Thread.start,
    }
    return objs


def changed(before: dict[str, object]) -> list[str]:
    now = watched_objects()
    return [name for name, obj in before.items() if now.get(name) is not obj]


def new_threads(before: set[int]) -> list[str]:
    """Threads started since `before`, except torch's own (inductor's compile-pool timer starts
    lazily, after the reference was compiled)."""
    def torch_internal(t: threading.Thread) -> bool:
        target = getattr(t, "_target", None)
        return (getattr(target, "__module__", None) or "").startswith("torch.")

    return [t.name for t in threading.enumerate()
            if t.ident not in before and t.is_alive() and not torch_internal(t)]


def kernel_names(cuda_sources: list[str]) -> list[str]:
    return sorted({m.group(1) for src in cuda_sources for m in GLOBAL_NAME.finditer(src)})


def triton_kernel_names(source: str) -> list[str]:
    return sorted(set(TRITON_JIT.findall(source)))


def attribute(kernels: list[tuple[str, float]], ours: list[str]) -> tuple[float, float, float]:
    """GPU time split into (candidate's own kernels, library/PyTorch kernels, other)."""
    own = lib = other = 0.0
    patterns = [re.compile(rf"\b{re.escape(k)}\b") for k in ours]
    for name, us in kernels:
        if LIBRARY_SURE.search(name):
            lib += us
        elif any(p.search(name) for p in patterns):
            own += us
        elif LIBRARY_LIKELY.search(name):
            lib += us
        else:
            other += us
    return own, lib, other
