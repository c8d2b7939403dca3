"""Parent -> child: what changed in the source and what it did to the time (with its CI) and
to the bottleneck. Stored as the child's `change` profile and shown in prompts and reports."""
from __future__ import annotations

import difflib

MAX_DIFF_CHARS = 6000


def compare(parent_id: int, parent_source: str, child_source: str, parent_rt: dict,
            child_rt: dict, parent_class: str | None, child_class: str | None) -> dict:
    """{parent_id, parent_ms, child_ms, delta_ms, delta_ci_ms, relative, verdict, added,
    removed, diff, parent_class, child_class, summary}. The CI of the difference is the
    conservative one from the two medians' CIs (it holds whatever their correlation)."""
    diff = list(difflib.unified_diff(parent_source.splitlines(), child_source.splitlines(),
                                     "parent", "child", lineterm="", n=1))
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    p, c = parent_rt["time_ms"], child_rt["time_ms"]
    p_lo, p_hi = parent_rt.get("ci95_ms") or (p, p)
    c_lo, c_hi = child_rt.get("ci95_ms") or (c, c)
    lo, hi = c_lo - p_hi, c_hi - p_lo
    verdict = "faster" if hi < 0 else "slower" if lo > 0 else "no clear difference"
    relative = (c - p) / p
    shift = (f"; bottleneck {parent_class} -> {child_class}"
             if parent_class and child_class and parent_class != child_class else "")
    summary = (f"kernel {parent_id} -> this: {p:.4f} -> {c:.4f} ms ({100 * relative:+.1f}%, "
               f"difference 95% CI {lo:+.4f} to {hi:+.4f} ms: {verdict}); "
               f"+{added} -{removed} lines{shift}")
    return {"parent_id": parent_id, "parent_ms": p, "child_ms": c, "delta_ms": c - p,
            "delta_ci_ms": [lo, hi], "relative": relative, "verdict": verdict, "added": added,
            "removed": removed, "diff": "\n".join(diff)[:MAX_DIFF_CHARS],
            "parent_class": parent_class, "child_class": child_class, "summary": summary}
