"""The search's store layer: every query the engine and its policy run, as named functions.

Nothing here decides anything; policy.py chooses, engine.py and pipelines.py act.
"""
from __future__ import annotations

import json

from workbench import verdict_seal
from workbench.store import Store, now

# An LLM call consumed its slot unless the API failed (then resuming asks again).
CONSUMED = "(error_kind is null or error_kind != 'api')"
LATEST = ("left join evaluations e on e.id = "
          "(select max(id) from evaluations where kernel_id = k.id)")


def _eligible_sql(no_gpu: bool) -> str:
    # Only the verifier's own verdicts may seed (a forged `correct` row would steer the search).
    statuses = "'correct', 'unverified'" if no_gpu else "'correct'"
    return (f"((e.status in ({statuses}) or (e.status = 'flagged' and k.cleared = 1)) "
            f"and {verdict_seal.sql('e')})")


def _q(store: Store, sql: str, params: list) -> list[dict]:
    return list(store.db.query(sql, params))


def session_row(store: Store, session_id: int) -> dict | None:
    found = store.rows("sessions", "id = ?", [session_id])
    return found[0] if found else None


def session_status(store: Store, session_id: int) -> str:
    return store.get("sessions", session_id)["status"]


def latest_round(store: Store, session_id: int) -> dict | None:
    found = _q(store, "select * from rounds where session_id = ? order by n desc limit 1",
               [session_id])
    return found[0] if found else None


def ideated_seeds(store: Store, round_id: int) -> set[int | None]:
    """Seeds (kernel ids, None for the reference) whose ideation call of a round was answered."""
    return {r["kernel_id"] for r in _q(
        store, f"select kernel_id from llm_calls where round_id = ? and purpose = 'ideate' "
        f"and {CONSUMED}", [round_id])}


def round_seeds(round_row: dict) -> list[int | None]:
    return json.loads(round_row["seeds"] or "[]")


def proposed_ideas(store: Store, session_id: int) -> list[int]:
    return [r["id"] for r in _q(
        store, "select i.id from ideas i join rounds r on r.id = i.round_id "
        "where r.session_id = ? and i.status = 'proposed' order by i.id", [session_id])]


def unevaluated_kernels(store: Store, session_id: int) -> list[int]:
    """Kernels still to verify (a duplicate of another kernel never is, unless asked)."""
    return [r["id"] for r in _q(
        store, "select k.id from kernels k where k.session_id = ? and k.pruned = 0 and "
        "k.duplicate_of is null and not exists (select 1 from evaluations e where "
        "e.kernel_id = k.id) order by k.id", [session_id])]


def kernel_with_key(store: Store, session_id: int, key: str) -> int | None:
    """The session's first kernel with this normalised-source key (not itself a duplicate)."""
    row = store.db.execute(
        "select id from kernels where session_id = ? and source_key = ? and duplicate_of is "
        "null order by id limit 1", [session_id, key]).fetchone()
    return row[0] if row else None


def idea_with_key(store: Store, session_id: int, key: str) -> int | None:
    """The session's first idea with this normalised text."""
    row = store.db.execute(
        "select i.id from ideas i join rounds r on r.id = i.round_id where r.session_id = ? "
        "and i.text_key = ? order by i.id limit 1", [session_id, key]).fetchone()
    return row[0] if row else None


def session_idea_texts(store: Store, session_id: int) -> list[dict]:
    """Every idea of the session (id, text), oldest first."""
    return _q(store, "select i.id, i.text from ideas i join rounds r on r.id = i.round_id "
              "where r.session_id = ? order by i.id", [session_id])


def add_idea_echo(store: Store, idea_id: int, round_id: int, seed_kernel_id: int | None,
                  llm_call_id: int, text: str) -> int:
    """Record that an ideation call restated an idea the session already has."""
    return store.insert("idea_echoes", {
        "idea_id": idea_id, "round_id": round_id, "seed_kernel_id": seed_kernel_id,
        "llm_call_id": llm_call_id, "text": text})


def idea_echoes(store: Store, idea_id: int) -> list[dict]:
    return store.rows("idea_echoes", "idea_id = ?", [idea_id])


def repairable_kernels(store: Store, session_id: int, max_attempt: int,
                       statuses: tuple[str, ...]) -> list[int]:
    """Failed LLM kernels (latest verdict in `statuses`) below `max_attempt`, not yet repaired."""
    return [r["id"] for r in _q(
        store, f"select k.id from kernels k {LATEST} left join ideas i on i.id = k.idea_id "
        "where k.session_id = ? and k.pruned = 0 and k.origin in ('llm', 'repair', 'combine') "
        "and k.attempt < ? and coalesce(i.status, '') != 'vetoed' "
        f"and e.status in ({', '.join(repr(s) for s in statuses)}) "
        "and not (e.status = 'flagged' and k.cleared = 1) and not exists (select 1 from "
        f"llm_calls c where c.kernel_id = k.id and c.purpose = 'repair' and {CONSUMED}) "
        "order by k.id", [session_id, max_attempt])]


def refinable_kernels(store: Store, session_id: int, top_k: int, max_depth: int) -> list[int]:
    """Each round's top-k fastest eligible kernels whose refinement chain is shorter than
    max_depth (a refined kernel's attempt counts its depth) and which were not refined yet."""
    # Rank among all the round's eligible kernels, then drop the refined and the too deep:
    # ranking only the unrefined ones slid the "top-k" down the round, refining every kernel
    # one after another.
    return [r["id"] for r in _q(
        store, "select id from (select k.id, k.origin, k.attempt, row_number() over "
        "(partition by i.round_id order by e.time_ms, k.id) as rank from kernels k "
        f"{LATEST} join ideas i on i.id = k.idea_id where k.session_id = ? and k.pruned = 0 "
        f"and e.time_ms is not null and {_eligible_sql(False)} and k.duplicate_of is null "
        "and coalesce(i.status, '') != 'vetoed') ranked where rank <= ? "
        "and (case when origin = 'refine' then attempt else 0 end) < ? "
        "and not exists (select 1 from llm_calls c where c.kernel_id = ranked.id and "
        f"c.purpose = 'refine' and {CONSUMED}) order by id",
        [session_id, top_k, max_depth])]


def ideas_with_impl_counts(store: Store, session_id: int, statuses: tuple[str, ...]) -> list[dict]:
    """Ideas in `statuses` whose seed is not pruned, each with `done`: implement calls made."""
    marks = ", ".join("?" for _ in statuses)
    return _q(
        store, "select i.*, (select count(*) from llm_calls c where c.idea_id = i.id and "
        f"c.purpose = 'implement' and {CONSUMED}) as done from ideas i "
        "join rounds r on r.id = i.round_id left join kernels s on s.id = i.seed_kernel_id "
        f"where r.session_id = ? and i.status in ({marks}) and coalesce(s.pruned, 0) = 0 "
        "order by i.id", [session_id, *statuses])


def round_ideas_with_impl_counts(store: Store, session_id: int,
                                 round_id: int | None) -> list[dict]:
    """All ideas of a round (or of the session) with `done`: implement calls made."""
    return _q(
        store, "select i.*, (select count(*) from llm_calls c where c.idea_id = i.id and "
        f"c.purpose = 'implement' and {CONSUMED}) as done from ideas i join rounds r on "
        "r.id = i.round_id where r.session_id = ? and (? is null or i.round_id = ?)",
        [session_id, round_id, round_id])


def kernel_source_key(store: Store, kernel_id: int | None) -> str | None:
    if kernel_id is None:
        return None
    row = store.db.execute("select source_key from kernels where id = ?", [kernel_id]).fetchone()
    return row[0] if row else None


def kernel_exists(store: Store, kernel_id: int) -> bool:
    return store.db.execute("select 1 from kernels where id = ?", [kernel_id]).fetchone() \
        is not None


def bank_seed_reason(store: Store, kernel_id: int) -> str:
    row = next(store.db.query(
        "select p.name, p.family from kernels k join problems p on p.id = k.problem_id "
        "where k.id = ?", [kernel_id]))
    return f"from the bank: written for {row['name']} ({row['family']})"


def lineage_root(store: Store, kernel_id: int) -> int:
    """The first ancestor of a kernel (following parent_id): its lineage."""
    row = store.db.execute(
        "with recursive chain(id, parent_id, depth) as (select id, parent_id, 0 from kernels "
        "where id = ? union all select k.id, k.parent_id, c.depth + 1 from kernels k join "
        "chain c on k.id = c.parent_id where c.depth < 1000) "
        "select id from chain order by depth desc limit 1", [kernel_id]).fetchone()
    return row[0] if row else kernel_id


def combined_pairs(store: Store, session_id: int) -> set[frozenset]:
    """The kernel pairs a combine call of the session was given already."""
    return {frozenset((r["parent_id"], r["second_parent_id"])) for r in store.db.query(
        "select parent_id, second_parent_id from kernels where session_id = ? and "
        "origin = 'combine'", [session_id])}


def round_has_combine(store: Store, round_id: int) -> bool:
    return store.db.execute("select 1 from ideas where round_id = ? and author = 'combine'",
                            [round_id]).fetchone() is not None


def pinned_kernels(store: Store, problem_id: int) -> list[int]:
    return [r["id"] for r in _q(
        store, "select id from kernels where problem_id = ? and pinned = 1 and pruned = 0 "
        "order by id", [problem_id])]


def fastest_eligible(store: Store, session_id: int, no_gpu: bool, limit: int) -> list[dict]:
    """Kernels that may seed (correct, or flagged and cleared), fastest first, newest on ties."""
    return _q(
        store, f"select k.id, e.status, e.time_ms, e.speedup_eager from kernels k {LATEST} "
        f"where k.session_id = ? and k.pruned = 0 and {_eligible_sql(no_gpu)} "
        "order by e.time_ms is null, e.time_ms, k.id desc limit ?", [session_id, limit])


def archive_candidates(store: Store, session_id: int, no_gpu: bool) -> list[dict]:
    """Kernels that may enter the archive: eligible to seed, with their idea's kind, source
    and timing (median and 95% CI)."""
    return _q(
        store, f"select k.id, k.source, coalesce(i.kind, 'unspecified') as kind, e.time_ms, "
        f"e.ci95_lo_ms, e.ci95_hi_ms from kernels k {LATEST} "
        "left join ideas i on i.id = k.idea_id where k.session_id = ? and k.pruned = 0 "
        f"and k.duplicate_of is null and {_eligible_sql(no_gpu)} order by k.id", [session_id])


def seeded_kernels(store: Store, session_id: int) -> set[int]:
    """Kernels that seeded any round of the session."""
    return {s for r in store.rows("rounds", "session_id = ?", [session_id])
            for s in round_seeds(r) if s is not None}


def best_roofline_fraction(store: Store, session_id: int) -> tuple[int, float] | None:
    """(kernel, floor_ms / time_ms) of the session's kernel closest to the roofline floor,
    among kernels that may seed and were timed on a GPU."""
    row = next(store.db.query(
        f"select k.id, e.floor_ms / e.time_ms as fraction from kernels k {LATEST} "
        f"where k.session_id = ? and k.pruned = 0 and {_eligible_sql(False)} "
        "and e.floor_ms > 0 and e.time_ms > 0 order by fraction desc limit 1", [session_id]),
        None)
    return (row["id"], row["fraction"]) if row else None


def verifier_gpu_seconds(store: Store, session_id: int) -> float:
    """GPU time the session's verdicts report (the sum of their phases)."""
    total = 0.0
    for row in store.db.query(
            "select e.verdict from evaluations e join kernels k on k.id = e.kernel_id "
            "where k.session_id = ?", [session_id]):
        total += gpu_seconds(json.loads(row["verdict"] or "{}"))
    return total


def gpu_seconds(verdict: dict) -> float:
    return float(sum(v for v in (verdict.get("phase_s") or {}).values()
                     if isinstance(v, (int, float))))


def session_table(store: Store, session_id: int) -> list[dict]:
    """One row per kernel: round, idea, kernel, status, time_ms, speedup_eager."""
    return _q(
        store, "select r.n as round, k.idea_id as idea, k.id as kernel, k.origin, k.attempt, "
        "k.pruned, case when k.duplicate_of is not null then 'duplicate' else "
        f"case when e.id is not null and not {verdict_seal.sql('e')} then 'untrusted' else "
        "coalesce(e.status, 'pending') end end as status, k.duplicate_of, e.time_ms, "
        "e.speedup_eager, "
        "e.error from kernels k left join ideas i on i.id = k.idea_id "
        f"left join rounds r on r.id = i.round_id {LATEST} where k.session_id = ? "
        "order by k.id", [session_id])


def spent(store: Store, session_id: int) -> tuple[int, float]:
    """Tokens (input + output) and dollars this session's LLM calls have used."""
    row = store.db.execute(
        "select coalesce(sum(coalesce(tokens_in, 0) + coalesce(tokens_out, 0)), 0), "
        "coalesce(sum(cost_usd), 0) from llm_calls where session_id = ? and copied_from is "
        "null", [session_id]).fetchone()
    return int(row[0]), float(row[1])


def reference_eager_ms(store: Store, problem_id: int) -> float | None:
    """The latest PyTorch eager time of a problem's reference that the verifier measured (a
    sealed verdict), if any."""
    row = next(store.db.query(
        "select e.ref_eager_ms from evaluations e join kernels k on k.id = e.kernel_id "
        f"where k.problem_id = ? and e.ref_eager_ms is not null and {verdict_seal.sql('e')} "
        "order by e.id desc limit 1", [problem_id]), None)
    return row["ref_eager_ms"] if row else None


def idea_outcomes(store: Store, session_id: int) -> list[dict]:
    """Every idea of a session with `outcome`: 'status|speedup' of its best kernel, or None.
    A verdict without the verifier's seal reads 'untrusted|' (the prompts quote these)."""
    sealed = verdict_seal.sql("e")
    return _q(
        store, f"select i.id, i.kind, i.text, i.status, (select case when {sealed} then "
        "e.status || '|' || coalesce(e.speedup_eager, '') else 'untrusted|' end "
        "from kernels k " + LATEST + " where k.idea_id = i.id "
        f"and e.id is not null order by not {sealed}, e.status != 'correct', e.time_ms "
        "limit 1) as outcome "
        "from ideas i join rounds r on r.id = i.round_id where r.session_id = ? "
        "order by i.id", [session_id])


def finish_session(store: Store, session_id: int, reason: str = "finished") -> None:
    """Close every open round and mark the session finished, together."""
    with store.transaction():
        store.db.execute("update rounds set status = 'done', ended_at = ? where "
                         "session_id = ? and status != 'done'", [now(), session_id])
        store.update("sessions", session_id, status="finished", stop_reason=reason,
                     ended_at=now())


def stop_session(store: Store, session_id: int, reason: str) -> bool:
    """Mark a running session stopped; False when it was already stopped or finished."""
    if session_status(store, session_id) in ("stopped", "finished"):
        return False
    store.update("sessions", session_id, status="stopped", stop_reason=reason, ended_at=now())
    return True


def start_round(store: Store, session_id: int, n: int, seeds: list[int | None],
                previous_id: int | None, reasons: list[dict] | None = None) -> int:
    """Close the previous round and open round n with its seeds (and why each), together."""
    with store.transaction():
        if previous_id is not None:
            store.update("rounds", previous_id, status="done", ended_at=now())
        round_id = store.create_round(session_id, n)
        store.update("rounds", round_id, seeds=seeds, seed_reasons=reasons or [])
    return round_id
