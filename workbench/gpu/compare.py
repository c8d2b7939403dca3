"""Output comparison for correctness checks. Imports only torch and the standard library.

Tolerances are scaled by the reference output's RMS: a plain allclose with atol=1e-4 lets an
all-zeros answer pass wherever outputs are tiny (softmax over 65536 columns is ~1.5e-5).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    reason: str = ""


def _as_list(x) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def compare(out, ref, atol: float, rtol: float) -> Comparison:
    """Compare a candidate's output(s) with the reference's, element by element.

    Passes when every element satisfies |out - ref| <= atol * rms(ref) + rtol * |ref|,
    shapes and dtypes match, and nothing is NaN or infinite.
    """
    outs, refs = _as_list(out), _as_list(ref)
    if len(outs) != len(refs):
        return Comparison(False, float("inf"), float("inf"),
                          f"returned {len(outs)} outputs, expected {len(refs)}")
    worst_abs = worst_rel = 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        where = f"output {i}: " if len(refs) > 1 else ""
        if not isinstance(o, torch.Tensor):
            return Comparison(False, float("inf"), float("inf"),
                              f"{where}returned {type(o).__name__}, expected a Tensor")
        if type(o) is not torch.Tensor:
            return Comparison(False, float("inf"), float("inf"),
                              f"{where}returned a Tensor subclass ({type(o).__name__})")
        if tuple(o.shape) != tuple(r.shape):
            return Comparison(False, float("inf"), float("inf"),
                              f"{where}shape {tuple(o.shape)}, expected {tuple(r.shape)}")
        if o.dtype != r.dtype:
            return Comparison(False, float("inf"), float("inf"),
                              f"{where}dtype {o.dtype}, expected {r.dtype}")
        if not r.is_floating_point():
            exact = bool(torch.equal(o.to(r.device), r))
            if not exact:
                return Comparison(False, float("inf"), float("inf"),
                                  f"{where}integer output differs")
            continue
        o64 = o.detach().to(device=r.device, dtype=torch.float64)
        r64 = r.detach().to(torch.float64)
        if not bool(torch.isfinite(o64).all()):
            bad = int((~torch.isfinite(o64)).sum())
            return Comparison(False, float("inf"), float("inf"),
                              f"{where}{bad} NaN/inf values")
        diff = (o64 - r64).abs()
        scale = float(r64.pow(2).mean().sqrt()) if r64.numel() else 0.0
        bound = atol * max(scale, 1e-30) + rtol * r64.abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
        max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        over = diff > bound
        if bool(over.any()):
            n = int(over.sum())
            return Comparison(False, worst_abs, worst_rel,
                              f"{where}{n} of {r64.numel()} elements outside tolerance "
                              f"(max abs err {max_abs:.3g}, output RMS {scale:.3g})")
    return Comparison(True, worst_abs, worst_rel)
