"""Input sets for checks and timing. Imports only torch and the standard library.

Inputs are made directly on the GPU (get_inputs() under a CUDA default device), from seeds the
parent chose in secret, in several distributions so a kernel tuned to torch.randn's range, or
returning a constant, does not pass.
"""
from __future__ import annotations

import torch

DISTRIBUTIONS = ("default", "scaled", "shifted")


def generate(problem, seed: int, distribution: str) -> list:
    torch.manual_seed(seed)
    with torch.device("cuda"):
        items = list(problem.get_inputs())
    out = []
    for x in items:
        if isinstance(x, torch.Tensor):
            x = x.cuda()
            if x.is_floating_point():
                if distribution == "scaled":
                    x = x * 10.0
                elif distribution == "shifted":
                    x = x + x.abs().mean()
        out.append(x)
    return out


def clone(items: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in items]


def rolled(items: list, shift: int) -> list:
    """Fresh tensors holding the same values moved by `shift` places: same distribution, new
    memory, new contents at every address (defeats caching by pointer, id, shape or sample)."""
    out = []
    for x in items:
        if isinstance(x, torch.Tensor) and x.numel() > 1:
            flat = x.reshape(-1)
            x = torch.roll(flat, shift % flat.numel()).view(x.shape)
        elif isinstance(x, torch.Tensor):
            x = x.clone()
        out.append(x)
    return out


def tensors(value) -> list:
    items = value if isinstance(value, (list, tuple)) else [value]
    return [t for t in items if isinstance(t, torch.Tensor)]


def same_values(a: list, b: list) -> bool:
    ta, tb = tensors(a), tensors(b)
    return len(ta) == len(tb) and all(
        x.shape == y.shape and x.dtype == y.dtype and bool(torch.equal(x, y))
        for x, y in zip(ta, tb))


def poison_allocator(nbytes: int) -> None:
    """Fill free cached memory with NaN so an output the candidate never writes reads as NaN
    (and so it cannot find the reference's answer in a recycled block)."""
    n = max(nbytes // 4, 1 << 20)
    junk = torch.full((n,), float("nan"), device="cuda")
    del junk
