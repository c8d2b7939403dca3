"""Fork a session at a round, and compare sessions side by side.

A fork keeps the original's rounds before round N (ideas, kernels, verdicts and the LLM calls
that shaped them, as copies) and runs round N onward with its own models, settings or seeds.
The copied calls' tokens and dollars stay the original's: a fork's spend is its own work only.
"""
from __future__ import annotations

import json
from typing import Any

from workbench.report import session_summary
from workbench.search.queries import spent
from workbench.store import Store, now


class ForkError(Exception):
    """A fork that cannot be made; str() is one line."""


def fork_session(store: Store, session_id: int, at_round: int,
                 settings: dict[str, Any] | None = None, provider: str | None = None,
                 model: str | None = None, base_url: str | None = None) -> int:
    """A new session sharing rounds 0..at_round-1 of `session_id`; returns its id."""
    original = store.find("sessions", session_id)
    if original is None:
        raise ForkError(f"no session {session_id}")
    rounds = store.rows("rounds", "session_id = ? and n < ?", [session_id, at_round],
                        order_by="n")
    last = max((r["n"] for r in store.rows("rounds", "session_id = ?", [session_id])),
               default=-1)
    if at_round < 1 or at_round > last + 1:
        raise ForkError(f"session {session_id} has rounds 0..{last}: fork at a round from 1 to "
                        f"{last + 1} (the fork keeps the rounds before it)")
    data = {**json.loads(original["settings"] or "{}"), **(settings or {})}
    with store.transaction():
        new_id = store.create_session(original["problem_id"], provider or original["provider"],
                                      model or original["model"], data,
                                      base_url=base_url or original["base_url"])
        store.update("sessions", new_id, forked_from=session_id, fork_round=at_round)
        _copy_rounds(store, session_id, new_id, rounds)
    return new_id


def _copy_rounds(store: Store, old_sid: int, new_sid: int, rounds: list[dict]) -> None:
    round_ids, idea_ids, kernel_ids, call_ids = {}, {}, {}, {}
    kept = {r["id"] for r in rounds}
    for r in rounds:
        round_ids[r["id"]] = store.insert("rounds", {
            "session_id": new_sid, "n": r["n"], "status": "done", "started_at": r["started_at"],
            "ended_at": r["ended_at"] or now()})
    for c in store.rows("llm_calls", "session_id = ? and round_id is not null", [old_sid]):
        if c["round_id"] in kept:
            row = {k: v for k, v in c.items() if k not in ("id", "idea_id", "kernel_id")}
            call_ids[c["id"]] = store.insert("llm_calls", {
                **row, "session_id": new_sid, "round_id": round_ids[c["round_id"]],
                "copied_from": c["id"]})
    for i in store.rows("ideas", f"round_id in ({','.join(map(str, kept)) or 'null'})"):
        row = {k: v for k, v in i.items() if k != "id"}
        idea_ids[i["id"]] = store.insert("ideas", {
            **row, "round_id": round_ids[i["round_id"]],
            "llm_call_id": call_ids.get(i["llm_call_id"]), "seed_kernel_id": None})
    for k in store.rows("kernels", "session_id = ?", [old_sid]):
        in_round = k["idea_id"] in idea_ids
        hand_edit = k["idea_id"] is None and k["parent_id"] in kernel_ids
        if not (in_round or hand_edit):
            continue
        row = {c: v for c, v in k.items() if c != "id"}
        kernel_ids[k["id"]] = store.insert("kernels", {
            **row, "session_id": new_sid, "idea_id": idea_ids.get(k["idea_id"]),
            "parent_id": kernel_ids.get(k["parent_id"], k["parent_id"]),
            "duplicate_of": kernel_ids.get(k["duplicate_of"]),
            "second_parent_id": kernel_ids.get(k["second_parent_id"], k["second_parent_id"]),
            "llm_call_id": call_ids.get(k["llm_call_id"])})
        ev = store.latest_evaluation(k["id"])
        if ev is not None:
            store.copy_evaluation(ev, kernel_ids[k["id"]])
    for old_id, new_id in idea_ids.items():   # seeds of copied ideas, now that kernels exist
        seed = store.get("ideas", old_id)["seed_kernel_id"]
        store.update("ideas", new_id, seed_kernel_id=kernel_ids.get(seed, seed))
    for old_id, new_id in call_ids.items():   # what each copied call was about
        c = store.get("llm_calls", old_id)
        store.update("llm_calls", new_id, idea_id=idea_ids.get(c["idea_id"]),
                     kernel_id=kernel_ids.get(c["kernel_id"], c["kernel_id"]))
    for r in rounds:
        seeds = [kernel_ids.get(s, s) for s in json.loads(r["seeds"] or "[]")]
        reasons = [{**x, "kernel_id": kernel_ids.get(x.get("kernel_id"), x.get("kernel_id"))}
                   for x in json.loads(r["seed_reasons"] or "[]")]
        store.update("rounds", round_ids[r["id"]], seeds=seeds, seed_reasons=reasons)


def compare(store: Store, session_ids: list[int]) -> list[dict]:
    """Side by side: models, fork origin, best kernel, fast_1 / fast_1.5, kernels, $ spent."""
    out = []
    for sid in session_ids:
        session = store.find("sessions", sid)
        if session is None:
            raise ForkError(f"no session {sid}")
        summary = session_summary(store, session)
        tokens, dollars = spent(store, sid)
        best = summary["best"]
        speedup = best["speedup_eager"] if best else None
        models = json.loads(session["settings"] or "{}").get("models") or {}
        out.append({
            "session_id": sid, "problem": summary["problem"], "model": session["model"],
            "models": {role: [m["model"] for m in specs] for role, specs in models.items()},
            "forked_from": session["forked_from"], "fork_round": session["fork_round"],
            "status": session["status"], "best_kernel": best["kernel_id"] if best else None,
            "best_speedup_eager": speedup, "fast_1": bool(speedup and speedup > 1.0),
            "fast_1.5": bool(speedup and speedup > 1.5), "kernels": summary["kernels"],
            "correct": summary["correct"], "tokens": tokens, "cost_usd": dollars})
    return out


def render_compare(rows: list[dict]) -> str:
    head = (f"{'session':>7}  {'model(s)':<28} {'fork of':>8} {'best':>7} {'kernel':>7} "
            f"{'fast_1':>6} {'correct':>9} {'spent':>9}")
    lines = [head]
    for r in rows:
        roles = ", ".join(f"{role}:{'+'.join(m)}" for role, m in r["models"].items())
        who = (roles or r["model"] or "-")[:28]
        fork = f"s{r['forked_from']}@r{r['fork_round']}" if r["forked_from"] else "-"
        best = f"{r['best_speedup_eager']:.2f}x" if r["best_speedup_eager"] else "-"
        kernel = f"k{r['best_kernel']}" if r["best_kernel"] else "-"
        lines.append(f"{r['session_id']:>7}  {who:<28} {fork:>8} {best:>7} {kernel:>7} "
                     f"{'yes' if r['fast_1'] else 'no':>6} "
                     f"{str(r['correct']) + '/' + str(r['kernels']):>9} "
                     f"{'$' + format(r['cost_usd'], '.4f'):>9}")
    return "\n".join(lines)
