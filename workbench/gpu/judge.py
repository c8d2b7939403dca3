"""Decisions of the correctness check, apart from the tensors: what the reference itself can
distinguish, which input variants a problem allows, how many redraws, what is a floor, when
PyTorch does the work. Standard library only (runs inside the GPU worker; tested on a CPU).
"""
from __future__ import annotations

import random

VARIANTS = ("default", "scaled", "shifted")
# A candidate's rounding may exceed the reference's own (another summation order, a split
# reduction) by this factor on the RMS before it counts as wrong. Against an output the size of
# its own rounding noise this is what "correct" can mean; elsewhere it is far below atol.
NOISE_FACTOR = 32.0
MAX_REDRAWS = 4          # fresh draws for one trial while the reference gives NaN/inf
DISCRETE_VALUES = 16     # an input with at most this many distinct values is labels or a mask
ZERO_SHARE = 0.01        # more exact zeros than this: zeros are structure (triangular, masked)
# Library kernels' share of GPU time that means PyTorch did the work: nearly all of it, so a
# wrapper around library calls is flagged while a model that keeps its convolutions in cuDNN
# around its own kernel (KernelBench level 3, its mnist2 example: 91% on the H200) is not.
PYTORCH_MOST = 0.95
BELOW_FLOOR = 0.85       # measured ceilings sit a little under the true peaks: allow 15%
# The reference's run-to-run difference is measured once; where it is random (KernelBench's
# LSTM draws its initial state on every call) the next pair differs by more about half the time.
JITTER_FACTOR = 2.0


def allowance(ref_err_rms: float, ref_jitter: float = 0.0) -> float:
    """Absolute slack on top of atol/rtol: the reference's own rounding error (RMS of fp32 vs
    fp64) and its own run-to-run difference."""
    return NOISE_FACTOR * ref_err_rms + JITTER_FACTOR * ref_jitter


def allowed_variants(zero_share: float, distinct: int, sample: int) -> set[str]:
    """The variants that keep one input's structure. Labels and masks (few distinct values) stay
    as drawn; zeros in place (triangular, masked) survive scaling but not shifting."""
    if sample >= 4 * DISCRETE_VALUES and distinct <= DISCRETE_VALUES:
        return {"default"}
    if zero_share > ZERO_SHARE:
        return {"default", "scaled"}
    return set(VARIANTS)


def variant_plan(declared, trials: int) -> list[str]:
    """Which variant each trial asks for: the problem's INPUT_VARIANTS when it declares them,
    else all; the first trial always uses get_inputs() as written."""
    allowed = [v for v in VARIANTS if v in (declared or VARIANTS)]
    return [allowed[i % len(allowed)] for i in range(trials)]


def next_draw(wanted: str, dropped: set[str], seed: int, attempt: int) -> tuple[str, int]:
    """(variant, seed) for an attempt at one trial. A variant that once made the reference
    non-finite is dropped for the rest of the evaluation; redraws get seeds derived from the
    secret one."""
    variant = "default" if wanted in dropped else wanted
    if attempt == 0:
        return variant, seed
    return variant, random.Random(seed * 1_000_003 + attempt).randrange(1 << 31)


def repeat_is_evidence(candidate_repeated: bool, references_distinguishable: bool) -> bool:
    """A candidate that gives the same output for different inputs is caching only where the
    reference's own outputs for those inputs differ beyond what the check can tell apart."""
    return candidate_repeated and references_distinguishable


def must_move_bytes(input_bytes: list[int], zero_shares: list[float], output_bytes: int,
                    input_independent: bool) -> int:
    """Bytes no correct kernel can avoid: each input's non-zero part read once (a kernel may skip
    zeros it knows are there), the outputs written once. An output that does not depend on the
    inputs needs no input read at all."""
    if input_independent:
        return output_bytes
    return output_bytes + int(sum(b * (1.0 - z) for b, z in zip(input_bytes, zero_shares)))


def floors(flops: int | None, flops_declared: bool, declared_bytes: int | None,
           must_bytes: int, flops_rate: float, bytes_rate: float) -> dict:
    """The hard floor (a kernel faster than it did not do the work) and the roofline estimate.
    Only declared FLOPs and bytes that must move make the hard floor: FLOPs counted from the
    dense ops overstate the work of a structured problem (a triangular matmul needs a sixth)."""
    byte_ms = (declared_bytes if declared_bytes is not None else must_bytes) / bytes_rate * 1e3
    flop_ms = (flops or 0) / flops_rate * 1e3
    hard = max(byte_ms, flop_ms if flops_declared else 0.0)
    basis = "declared FLOPs" if flops_declared and flop_ms >= byte_ms else (
        "declared bytes" if declared_bytes is not None else "inputs read and outputs written once")
    return {"hard_floor_ms": hard, "roofline_ms": max(byte_ms, flop_ms), "floor_basis": basis}


def below_floor(time_ms: float, hard_floor_ms: float) -> bool:
    return time_ms < BELOW_FLOOR * hard_floor_ms


def pytorch_share(own_us: float, library_us: float, other_us: float,
                  has_own_kernels: bool) -> float | None:
    """Share of the GPU time spent in PyTorch/library kernels. A candidate without kernels of
    its own ran nothing but PyTorch's, whatever their names."""
    total = own_us + library_us + other_us
    if total <= 0:
        return None
    return (library_us + (0.0 if has_own_kernels else other_us)) / total


def pytorch_does_the_work(share: float | None) -> bool:
    return share is not None and share >= PYTORCH_MOST
