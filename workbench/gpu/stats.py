"""Robust statistics for timing samples. Standard library only (runs inside the GPU worker).

Medians with distribution-free 95% confidence intervals from order statistics: timing samples
are skewed (preemption, clock dips), so normal-theory intervals on the mean would mislead.
"""
from __future__ import annotations

import math


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of no samples")
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def median_ci95(xs: list[float]) -> tuple[float, float]:
    """95% CI of the median: ranks n/2 -/+ 1.96*sqrt(n)/2 (binomial, normal approximation)."""
    s = sorted(xs)
    n = len(s)
    if n < 6:
        return (s[0], s[-1])
    half = 0.98 * math.sqrt(n)
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return (s[lo], s[hi])


def rel_half_width(xs: list[float]) -> float:
    """Half-width of the median's 95% CI relative to the median."""
    lo, hi = median_ci95(xs)
    m = median(xs)
    return (hi - lo) / 2 / m if m > 0 else math.inf


def ratio_summary(numer: list[float], denom: list[float]) -> tuple[float, tuple[float, float]]:
    """Median and 95% CI of paired ratios numer[i]/denom[i] (samples taken in the same A/B round,
    so drift common to both cancels)."""
    ratios = [a / b for a, b in zip(numer, denom) if b > 0]
    return median(ratios), median_ci95(ratios)
