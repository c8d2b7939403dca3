"""Input sets for checks and timing. Imports only torch and the standard library.

Inputs are made directly on the GPU (get_inputs() under a CUDA default device), from seeds the
parent chose in secret. Besides fresh draws, scaled and shifted variants test a kernel tuned to
torch.randn's range, but only on inputs whose structure they keep (workbench.gpu.judge).
"""
from __future__ import annotations

import torch

from workbench.gpu import judge

SAMPLE = 1 << 16
DEVICE = "cuda"  # tests run the correctness checks on the CPU


def structure(items: list) -> list[dict]:
    """Per input: its bytes, share of exact zeros and the variants that keep its structure,
    from an evenly strided sample (triangular matrices have no zeros in their first rows)."""
    found = []
    for x in items:
        if not isinstance(x, torch.Tensor):
            found.append({"bytes": 0, "zero_share": 0.0, "variants": {"default"}})
            continue
        info = {"bytes": x.numel() * x.element_size(), "zero_share": 0.0,
                "variants": {"default"}}
        if x.is_floating_point() and x.numel():
            flat = x.reshape(-1)
            sample = flat[::max(1, flat.numel() // SAMPLE)]
            zeros = float((sample == 0).float().mean())
            distinct = int(torch.unique(sample).numel())
            info.update(zero_share=zeros,
                        variants=judge.allowed_variants(zeros, distinct, sample.numel()))
        elif x.numel():
            info["zero_share"] = float((x.reshape(-1)[::max(1, x.numel() // SAMPLE)] == 0)
                                       .float().mean())
        found.append(info)
    return found


def generate(problem, seed: int, distribution: str, shape_info: list[dict] | None = None) -> list:
    """get_inputs() from `seed`, with `distribution` applied to the floating inputs it keeps
    the structure of (all floating inputs when shape_info is None)."""
    torch.manual_seed(seed)
    with torch.device(DEVICE):
        items = list(problem.get_inputs())
    out = []
    for k, x in enumerate(items):
        if isinstance(x, torch.Tensor):
            x = x.to(DEVICE)
            keeps = shape_info is None or distribution in shape_info[k]["variants"]
            if x.is_floating_point() and keeps:
                if distribution == "scaled":
                    x = x * 10.0
                elif distribution == "shifted":
                    x = x + x.abs().mean()
        out.append(x)
    return out


def to_float64(items: list) -> list:
    return [x.detach().to(torch.float64, copy=True) if isinstance(x, torch.Tensor) and
            x.is_floating_point() else x.clone() if isinstance(x, torch.Tensor) else x
            for x in items]


def clone(items: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in items]


def zero_masks(items: list) -> list:
    """Per input, where its exact zeros are when zeros are its structure (triangular, masked),
    else None: rolled() keeps them in place so a kernel that skips the zero half stays right."""
    found = structure(items)
    return [x == 0 if isinstance(x, torch.Tensor) and info["zero_share"] > judge.ZERO_SHARE
            and x.is_floating_point() else None for x, info in zip(items, found)]


def rolled(items: list, shift: int, masks: list | None = None) -> list:
    """Fresh tensors holding the same values moved by `shift` places: same distribution, new
    memory, new contents at every address (defeats caching by pointer, id, shape or sample).
    Where `masks` names structural zeros, those stay zero."""
    out = []
    for k, x in enumerate(items):
        if isinstance(x, torch.Tensor) and x.numel() > 1:
            flat = x.reshape(-1)
            x = torch.roll(flat, shift % flat.numel()).view(x.shape)
            if masks is not None and masks[k] is not None:
                x.masked_fill_(masks[k], 0)
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
    if DEVICE != "cuda":
        return
    n = max(nbytes // 4, 1 << 20)
    junk = torch.full((n,), float("nan"), device="cuda")
    del junk
