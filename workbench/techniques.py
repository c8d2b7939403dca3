"""Which optimisation techniques a kernel's code uses, read from its normalised source.

The archive's cells (search/archive.py) and the bank's listing (bank.py) both use it.
"""
from __future__ import annotations

import re
from functools import lru_cache

from workbench.source_key import normalize

# technique -> what in the code shows it (read from the normalised source: no comments).
TECHNIQUES: dict[str, re.Pattern] = {
    "tensor_cores": re.compile(r"wmma::|\bmma_sync\b|\bmma\.sync\b|\bwgmma\b|__hmma|"
                               r"\bnvcuda::wmma|cute::|cutlass::gemm"),
    "smem_tiling": re.compile(r"__shared__"),
    "vectorized": re.compile(r"\b(?:float[24]|half2|__half2|int4|uint4|double2|"
                             r"__nv_bfloat162)\b"),
    "warp_reduce": re.compile(r"__shfl_(?:down_|xor_|up_)?sync|__reduce_\w+_sync|"
                              r"cg::reduce|WarpReduce"),
    "async_copy": re.compile(r"cp\.async|__pipeline_memcpy_async|memcpy_async|"
                             r"cuda::pipeline"),
    # (the normalised Python part reads "torch . float16": tokens are space-separated)
    "half_precision": re.compile(r"\b(?:__half2?|half2?|__nv_bfloat162?|at::kHalf|at::kBFloat16|"
                                 r"torch\s*\.\s*(?:float16|bfloat16|half))\b"),
}
SHORT = {"tensor_cores": "tc", "smem_tiling": "smem", "vectorized": "vec",
         "warp_reduce": "warp", "async_copy": "async", "half_precision": "half"}


@lru_cache(maxsize=4096)   # the bank and the archive read the same sources again and again
def signature(source: str) -> tuple[str, ...]:
    """The techniques a kernel's code uses, in TECHNIQUES order."""
    code = normalize(source)
    return tuple(name for name, pattern in TECHNIQUES.items() if pattern.search(code))
