"""Session reports: best kernel per problem, speedup over rounds, KernelBench's fast_p.

"Correct" here is the latest evaluation's status `correct`, or `flagged` and cleared by a person.
fast_p (KernelBench) is the share of the selected problems whose best correct kernel is faster than
p x eager (speedup > p); fast_0 is the share with a correct kernel. The geometric mean is of the
best correct kernel's speedup over eager, over the problems that have one.
"""
from __future__ import annotations

import math

from workbench.gpu import baseline
from workbench.gpu.verdict import fmt_x
from workbench.kernel_report import counts_as_correct
from workbench.model_report import model_table, render_models
from workbench.store import Store
from workbench.verdict_seal import UNTRUSTED

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BAR_WIDTH = 30


class ReportError(Exception):
    """A selector that matches nothing; str() is one line."""


def select_sessions(store: Store, selectors: list[str]) -> list[dict]:
    """Sessions by id, or all sessions of problems by name; all sessions when none is given."""
    if not selectors:
        return store.rows("sessions")
    chosen: dict[int, dict] = {}
    for sel in selectors:
        if sel.isdigit():
            session = store.find("sessions", int(sel))
            if session is None:
                raise ReportError(f"session {sel}: no such session in {store.path}")
            chosen[session["id"]] = session
            continue
        problems = store.rows("problems", "name = ?", [sel])
        sessions = [s for p in problems
                    for s in store.rows("sessions", "problem_id = ?", [p["id"]])]
        if not sessions:
            raise ReportError(f"{sel}: neither a session id nor a problem with sessions in "
                              f"{store.path}")
        chosen.update({s["id"]: s for s in sessions})
    return [chosen[k] for k in sorted(chosen)]


def _better(a: dict | None, b: dict) -> bool:
    """Whether kernel row b beats a: higher speedup over eager, then lower time, then older."""
    if a is None:
        return True
    sa, sb = a["speedup_eager"] or 0.0, b["speedup_eager"] or 0.0
    if sb != sa:
        return sb > sa
    ta, tb = a["time_ms"] or math.inf, b["time_ms"] or math.inf
    return tb < ta


def _kernel_summary(row: dict) -> dict:
    return {"kernel_id": row["id"], "round": row["round_n"] or 0, "status": row["status"],
            "speedup_eager": row["speedup_eager"], "speedup_compile": row["speedup_compile"],
            "time_ms": row["time_ms"], "ci95_ms": [row["ci95_lo_ms"], row["ci95_hi_ms"]],
            "ref_eager_ms": row["ref_eager_ms"], "ref_compile_ms": row["ref_compile_ms"]}


def session_summary(store: Store, session: dict) -> dict:
    problem = store.get("problems", session["problem_id"])
    kernels = store.session_kernels(session["id"])
    per_round: dict[int, dict] = {}
    for n in sorted({r["n"] for r in store.rows("rounds", "session_id = ?", [session["id"]])}):
        per_round[n] = {"round": n, "kernels": 0, "correct": 0, "best": None}
    for row in kernels:
        n = row["round_n"] or 0   # kernels without an idea (seeds) count as round 0
        entry = per_round.setdefault(n, {"round": n, "kernels": 0, "correct": 0, "best": None})
        entry["kernels"] += 1
        if not counts_as_correct(row["status"], row["cleared"], row["trusted"]):
            continue
        entry["correct"] += 1
        if _better(entry["best"], row):
            entry["best"] = row
    chosen = store.best_kernel(session["id"])
    best = next((row for row in kernels if chosen and row["id"] == chosen["id"]), None)
    rounds, running = [], None
    for n in sorted(per_round):
        entry = per_round[n]
        if entry["best"] is not None and _better(running, entry["best"]):
            running = entry["best"]
        rounds.append({
            "round": n, "kernels": entry["kernels"], "correct": entry["correct"],
            "best_speedup_eager": entry["best"]["speedup_eager"] if entry["best"] else None,
            "best_so_far_speedup_eager": running["speedup_eager"] if running else None})
    return {"session_id": session["id"], "problem_id": problem["id"], "problem": problem["name"],
            "provider": session["provider"], "model": session["model"],
            "status": session["status"], "gpu": session["gpu"],
            "kernels": len(kernels), "correct": sum(r["correct"] for r in rounds),
            "untrusted": [r["id"] for r in kernels if not r["trusted"]],
            "best": _kernel_summary(best) if best else None, "rounds": rounds,
            "baseline": (store.settings(session["id"]).get("eval") or {}).get("baseline", "default")}


def build_report(store: Store, selectors: list[str]) -> dict:
    """The report over the selected sessions, JSON-ready."""
    sessions = [session_summary(store, s) for s in select_sessions(store, selectors)]
    # Keyed by problem row: an edited problem file is a different problem.
    best_per_problem: dict[int, dict | None] = {}
    names: dict[int, str] = {}
    for s in sessions:
        names[s["problem_id"]] = s["problem"]
        current = best_per_problem.setdefault(s["problem_id"], None)
        if s["best"] is not None and _better(current, s["best"]):
            best_per_problem[s["problem_id"]] = s["best"] | {"session_id": s["session_id"]}
    bests = list(best_per_problem.values())
    total = len(bests)
    correct = sum(b is not None for b in bests)

    def share_faster(p: float) -> float | None:
        if not total:
            return None
        if p == 0:  # fast_0: correct, whatever the speed
            return correct / total
        return sum(1 for b in bests if b is not None and (b["speedup_eager"] or 0.0) > p) / total

    fast_p = {f"{p:g}": share_faster(p) for p in FAST_P}
    speedups = [b["speedup_eager"] for b in bests if b is not None and b["speedup_eager"]]
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None
    return {"sessions": sessions,
            "problems": [{"problem_id": pid, "problem": names[pid], "best": best}
                         for pid, best in sorted(best_per_problem.items())],
            "problems_total": total, "problems_correct": correct, "fast_p": fast_p,
            "geomean_speedup_eager": geomean, "geomean_over_problems": len(speedups),
            "models": model_table(store, [s["session_id"] for s in sessions])}


def _bar(value: float | None, top: float) -> str:
    """A unicode bar of value on a 0..top scale, in eighths of a cell."""
    if not value or top <= 0:
        return ""
    eighths = round(BAR_WIDTH * 8 * min(value, top) / top)
    partial = ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]
    return "█" * (eighths // 8) + partial


def render_text(report: dict) -> str:
    out = []
    for s in report["sessions"]:
        who = " / ".join(x for x in (s["provider"], s["model"]) if x) or "no model"
        out.append(f"session {s['session_id']}  {s['problem']}  ({who}, {s['status'] or '-'}, "
                   f"GPU {s['gpu'] or 'unknown'})  {s['kernels']} kernels, {s['correct']} correct")
        mode = s.get("baseline") or "default"
        out.append(f"  eager and torch.compile timed under "
                   f"{baseline.MODES.get(mode, (0, 0, mode))[2]}; correctness in strict fp32")
        if s["untrusted"]:
            ids = ", ".join(map(str, s["untrusted"]))
            out.append(f"  UNTRUSTED verdicts, not counted: kernel{'s' * (len(s['untrusted']) > 1)}"
                       f" {ids} ({UNTRUSTED})")
        b = s["best"]
        if b:
            out.append(f"  best: kernel {b['kernel_id']} (round {b['round']}): "
                       f"{fmt_x(b['speedup_eager'])} vs eager, {fmt_x(b['speedup_compile'])} vs "
                       "torch.compile, "
                       + ("-" if b["time_ms"] is None else f"{b['time_ms']:.4f} ms"))
        else:
            out.append("  best: no correct kernel")
        top = max([r["best_so_far_speedup_eager"] or 0 for r in s["rounds"]] + [1.0])
        out.append(f"  speedup vs eager by round (bar: best so far, scale 0..{top:.2f}x):")
        for r in s["rounds"]:
            bar = _bar(r["best_so_far_speedup_eager"], top)
            out.append(f"  {r['round']:>4} {bar:<{BAR_WIDTH + 1}}"
                       f" {fmt_x(r['best_so_far_speedup_eager']):>8}  (this round "
                       f"{fmt_x(r['best_speedup_eager'])}, {r['correct']}/{r['kernels']} correct)")
        out.append("")
    total = report["problems_total"]
    if not total:
        return "no sessions selected\n"
    out.append("best kernel per problem:")
    for entry in report["problems"]:
        b = entry["best"]
        out.append(f"  {entry['problem']:<24} " + (
            "no correct kernel" if b is None else
            f"kernel {b['kernel_id']} (session {b['session_id']}): {fmt_x(b['speedup_eager'])} vs "
            f"eager, {fmt_x(b['speedup_compile'])} vs torch.compile"))
    out.append("")
    out.append(f"KernelBench fast_p over {total} problem(s) (share correct and faster than "
               "p x eager):")
    out.append("  " + "  ".join(f"{'fast_' + p:>9}" for p in report["fast_p"]))
    out.append("  " + "  ".join(f"{v:>9.1%}" for v in report["fast_p"].values()))
    if report["geomean_speedup_eager"] is None:
        out.append("geometric-mean speedup vs eager: none (no problem has a correct, timed kernel)")
    else:
        out.append(f"geometric-mean speedup vs eager: {report['geomean_speedup_eager']:.3f}x, over "
                   f"the {report['geomean_over_problems']} of {total} problem(s) with a correct, "
                   "timed kernel (the best kernel of each)")
    models = render_models(report.get("models") or [])
    if models:
        out += [""] + models
    return "\n".join(out) + "\n"
