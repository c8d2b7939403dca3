"""Per-model yield: calls, tokens, dollars and kernels attributed to the model that wrote them.

A kernel belongs to the model whose call wrote it (implement, repair, combine); ideation is
counted in calls and cost. "best speedup per $" is the model's best correct speedup over eager
divided by what the model cost in the selected sessions.
"""
from __future__ import annotations

from workbench import verdict_seal
from workbench.kernel_report import counts_as_correct
from workbench.store import Store


def model_table(store: Store, session_ids: list[int]) -> list[dict]:
    """One row per (provider, model) over the sessions, most calls first."""
    if not session_ids:
        return []
    marks = ", ".join("?" for _ in session_ids)
    calls = store.db.query(
        "select provider, model, count(*) as calls, coalesce(sum(tokens_in), 0) as tokens_in, "
        "coalesce(sum(tokens_out), 0) as tokens_out, sum(cost_usd) as cost_usd, "
        "sum(case when error_kind is not null then 1 else 0 end) as failed_calls "
        f"from llm_calls where session_id in ({marks}) and copied_from is null "
        "group by provider, model", session_ids)
    rows = {(r["provider"], r["model"]): {**r, "kernels": 0, "correct": 0,
                                          "best_speedup_eager": None} for r in calls}
    kernels = store.db.query(
        "select c.provider, c.model, e.status, k.cleared, e.speedup_eager, "
        f"(e.id is not null and {verdict_seal.sql('e')}) as trusted from kernels k "
        "join llm_calls c on c.id = k.llm_call_id left join evaluations e on e.id = "
        "(select max(id) from evaluations where kernel_id = k.id) "
        f"where k.session_id in ({marks}) and k.duplicate_of is null and c.copied_from is "
        "null", session_ids)
    for k in kernels:
        row = rows.get((k["provider"], k["model"]))
        if row is None:
            continue
        row["kernels"] += 1
        if counts_as_correct(k["status"], k["cleared"], k["trusted"]):
            row["correct"] += 1
            if k["speedup_eager"] is not None and (row["best_speedup_eager"] is None or
                                                   k["speedup_eager"] > row["best_speedup_eager"]):
                row["best_speedup_eager"] = k["speedup_eager"]
    out = []
    for row in rows.values():
        row["correct_pct"] = 100.0 * row["correct"] / row["kernels"] if row["kernels"] else None
        cost, best = row["cost_usd"], row["best_speedup_eager"]
        row["best_speedup_per_usd"] = best / cost if best is not None and cost else None
        out.append(row)
    return sorted(out, key=lambda r: (-r["calls"], r["provider"] or "", r["model"] or ""))


def render_models(rows: list[dict]) -> list[str]:
    """The table as text lines (empty when no calls were made)."""
    if not rows:
        return []
    out = ["per model (kernels attributed to the model that wrote them):",
           f"  {'provider / model':<34} {'calls':>5} {'tokens':>9} {'cost':>9} {'kernels':>7} "
           f"{'correct':>8} {'best':>7} {'best/$':>8}"]
    for r in rows:
        who = f"{r['provider'] or '?'} / {r['model'] or '?'}"[:34]
        cost = "-" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}"
        pct = "-" if r["correct_pct"] is None else f"{r['correct_pct']:.0f}%"
        best = "-" if r["best_speedup_eager"] is None else f"{r['best_speedup_eager']:.2f}x"
        per = "-" if r["best_speedup_per_usd"] is None else f"{r['best_speedup_per_usd']:.1f}"
        out.append(f"  {who:<34} {r['calls']:>5} {r['tokens_in'] + r['tokens_out']:>9,} "
                   f"{cost:>9} {r['kernels']:>7} {pct:>8} {best:>7} {per:>8}")
    return out
