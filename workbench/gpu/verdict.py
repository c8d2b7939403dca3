"""The verdict: what evaluating one candidate found, as one JSON-ready dict.

Keys (all present; None where a phase did not run):
  status            compile_error | incorrect | correct | flagged | timeout | crashed | unverified
  verified          True only when correctness and timing ran on a GPU
  compile_s, cache_hit, cache_key, extensions (sources load_inline saw), build_log (tail)
  trials, atol, rtol, max_abs_err, max_rel_err (max abs err / RMS of the reference output),
  trial_errors      [{trial, distribution, ok, max_abs_err, max_rel_err, reason}]
  time_ms, ci95_ms [lo, hi]                 candidate median and 95% CI of the median
  ref_eager_ms, ref_eager_ci95_ms, ref_compile_ms, ref_compile_ci95_ms
  speedup_eager, speedup_eager_ci95, speedup_compile, speedup_compile_ci95
  floor_ms, roofline_fraction (floor / time), samples {candidate, eager, compile}
                    floor_ms is the roofline estimate (counted FLOPs included); hard_floor_ms,
                    floor_basis: the floor below_floor uses (declared FLOPs, bytes that must move)
  baseline          {mode, matmul_tf32, cudnn_tf32, description, correctness}: how eager and
                    torch.compile were timed (correctness is always strict fp32)
  reference_precision, reference_error_rel (the fp32 reference's own error / output RMS),
  input_independent (the reference gave one output for every input), pytorch_share
  flags             [{kind, reason}]; notes [{kind, reason}] (shown, never a flag); error (first real error lines); gpu; phase_s
"""
from __future__ import annotations

STATUSES = ("compile_error", "incorrect", "correct", "flagged", "timeout", "crashed",
            "unverified")
KEYS = ("status", "verified", "compile_s", "cache_hit", "cache_key", "extensions", "build_log",
        "trials", "atol", "rtol", "max_abs_err", "max_rel_err", "trial_errors", "time_ms",
        "ci95_ms", "ref_eager_ms", "ref_eager_ci95_ms", "ref_compile_ms",
        "ref_compile_ci95_ms", "speedup_eager", "speedup_eager_ci95", "speedup_compile",
        "speedup_compile_ci95", "floor_ms", "roofline_fraction", "hard_floor_ms", "floor_basis",
        "baseline", "reference_precision", "reference_error_rel", "input_independent",
        "pytorch_share", "samples", "flags", "notes", "error",
        "gpu", "phase_s")


def empty(status: str) -> dict:
    verdict = dict.fromkeys(KEYS)
    verdict.update(status=status, verified=False, flags=[], notes=[], trial_errors=[], samples={},
                   phase_s={})
    return verdict


def fmt_ci(value, ci, digits: int, unit: str) -> str:
    """A figure with its 95% confidence interval, e.g. '0.5380 ms (95% CI 0.5371 to 0.5392)'."""
    if value is None:
        return "-"
    text = f"{value:.{digits}f}{unit}"
    if ci and ci[0] is not None:
        text += f" (95% CI {ci[0]:.{digits}f} to {ci[1]:.{digits}f})"
    return text


def fmt_ms(value, ci=None) -> str:
    return fmt_ci(value, ci, 4, " ms")


def fmt_x(value, ci=None) -> str:
    return fmt_ci(value, ci, 3, "x")


def describe(v: dict) -> str:
    """A readable multi-line verdict for the terminal."""
    lines = [f"status: {v['status']}" + ("" if v.get("verified") else "  (not verified on a GPU)")]
    if v.get("compile_s") is not None:
        lines.append(f"compile: {v['compile_s']:.2f} s" + (" (cache hit)" if v.get("cache_hit") else ""))
    if v.get("trials"):
        errors = [f"max {kind} err {v[key]:.3g}" for kind, key in
                  (("abs", "max_abs_err"), ("rel", "max_rel_err")) if v.get(key) is not None]
        lines.append(", ".join([f"correctness: {v['trials']} trials, atol={v['atol']:g} "
                                f"rtol={v['rtol']:g}", *errors]))
    if v.get("time_ms") is not None:
        lines.append(f"candidate:      {fmt_ms(v['time_ms'], v.get('ci95_ms'))}")
        lines.append(f"eager:          {fmt_ms(v['ref_eager_ms'], v.get('ref_eager_ci95_ms'))}")
        lines.append(f"torch.compile:  {fmt_ms(v['ref_compile_ms'], v.get('ref_compile_ci95_ms'))}")
        lines.append(f"speedup vs eager:         {fmt_x(v['speedup_eager'], v.get('speedup_eager_ci95'))}")
        lines.append(f"speedup vs torch.compile: {fmt_x(v['speedup_compile'], v.get('speedup_compile_ci95'))}")
        if v.get("compile_reference_error"):
            lines.append(f"torch.compile of the reference failed, so it was not timed: "
                         f"{v['compile_reference_error']}")
        if v.get("floor_ms"):
            lines.append(f"roofline floor: {v['floor_ms']:.4f} ms "
                         f"(the kernel runs at {100 * (v.get('roofline_fraction') or 0):.0f}% of roofline speed)")
        if v.get("hard_floor_ms") is not None:
            lines.append(f"hard floor:     {v['hard_floor_ms']:.4f} ms ({v.get('floor_basis')})")
    if v.get("baseline"):
        b = v["baseline"]
        lines.append(f"baselines: eager and torch.compile under {b['description']}; "
                     f"correctness against {b['correctness']}"
                     + (f" ({v['reference_precision']} reference)" if v.get("reference_precision") else ""))
    if v.get("reused_from"):
        lines.append(f"reused: the verdict of evaluation {v['reused_from']} (same source, same "
                     "settings)")
    for flag in v.get("flags") or []:
        lines.append(f"flag [{flag['kind']}]: {flag['reason']}")
    for note in v.get("notes") or []:
        lines.append(f"note [{note['kind']}]: {note['reason']}")
    if v.get("error"):
        lines.append("error: " + v["error"])
    return "\n".join(lines)
