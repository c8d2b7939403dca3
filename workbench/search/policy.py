"""What to try next: the search's decisions, read from the store and the settings.

Which seeds start a round, which ideas still want implementations, which failures get a repair,
what the engine does next, and when the budget stops it. Orchestration (engine.py, pipelines.py)
carries these decisions out.
"""
from __future__ import annotations

import json

from workbench.search import archive, queries
from workbench.search.archive import Entry, signature
from workbench.search.settings import SearchSettings, Stop
from workbench.store import Store

REPAIRABLE = ("compile_error", "incorrect", "crashed", "timeout", "flagged")


def seeds_to_ideate(store: Store, round_row: dict) -> list[int | None]:
    """A round's seeds whose ideation has not been answered yet."""
    done = queries.ideated_seeds(store, round_row["id"])
    return [s for s in queries.round_seeds(round_row) if s not in done]


def pending_review(store: Store, session_id: int, settings: SearchSettings) -> list[int]:
    """Ideas waiting for approve / edit / veto (only while review is on)."""
    return queries.proposed_ideas(store, session_id) if settings.review else []


def repairable(store: Store, session_id: int, settings: SearchSettings) -> list[int]:
    """Failed kernels with repair attempts left."""
    if settings.repairs <= 0:
        return []
    return queries.repairable_kernels(store, session_id, settings.repairs, REPAIRABLE)


def refinable(store: Store, session_id: int, settings: SearchSettings) -> list[int]:
    """Correct kernels among each round's top-k to send back with their evidence, once the
    round's implementations are all verified (so the top-k is settled), never without a GPU."""
    if settings.refines <= 0 or settings.eval.no_gpu:
        return []
    if implementable(store, session_id, settings) or queries.unevaluated_kernels(store, session_id):
        return []
    return queries.refinable_kernels(store, session_id, settings.top_k, settings.refines)


def implementable(store: Store, session_id: int,
                  settings: SearchSettings) -> list[tuple[dict, int]]:
    """(idea, implementations still to write) for approved ideas short of M."""
    statuses = ("approved", "edited") if settings.review else ("approved", "edited", "proposed")
    rows = queries.ideas_with_impl_counts(store, session_id, statuses)
    return [(row, settings.impls - row["done"]) for row in rows if row["done"] < settings.impls]


def next_action(store: Store, session_id: int, settings: SearchSettings) -> str:
    """ideate | review | evaluate | repair | implement | refine | done | stopped | finished."""
    status = queries.session_status(store, session_id)
    if status in ("stopped", "finished"):
        return status
    latest = queries.latest_round(store, session_id)
    if latest and seeds_to_ideate(store, latest):
        return "ideate"
    if pending_review(store, session_id, settings):
        return "review"
    if queries.unevaluated_kernels(store, session_id):
        return "evaluate"
    if repairable(store, session_id, settings):
        return "repair"
    if implementable(store, session_id, settings):
        return "implement"
    if refinable(store, session_id, settings):
        return "refine"
    if latest is not None and combine_pair(store, session_id, settings, latest):
        return "combine"
    if latest is None or latest["n"] + 1 < settings.rounds:
        return "ideate"
    return "done"


def archive_entries(store: Store, session_id: int, settings: SearchSettings) -> list[Entry]:
    """The session's kernels that may seed, placed in their archive cells."""
    return [Entry(r["id"], r["kind"], signature(r["source"]), r["time_ms"], r["ci95_lo_ms"],
                  r["ci95_hi_ms"])
            for r in queries.archive_candidates(store, session_id, settings.eval.no_gpu)]


def choose_seeds(store: Store, session_id: int, problem_id: int, settings: SearchSettings,
                 n: int) -> list[dict]:
    """Round n's seeds, each {kernel_id, cell, reason}: the reference for round 0, else up to
    top_k drawn across the archive's cells; kernels the user pinned always seed. No kernel
    (nor two with the same normalised source) seeds twice in a round."""
    seeded = queries.seeded_kernels(store, session_id)
    if n == 0:
        chosen = [{"kernel_id": None, "cell": "", "reason": "round 0 starts from the reference"}]
    else:
        seeds = archive.choose(archive_entries(store, session_id, settings), settings.top_k,
                               seeded)
        chosen = [s.to_dict() for s in seeds] or [
            {"kernel_id": None, "cell": "", "reason": "no kernel may seed yet: the reference"}]
    # Kernels picked from the bank seed the next round to start, once.
    chosen += [{"kernel_id": k, "cell": "", "reason": queries.bank_seed_reason(store, k)}
               for k in settings.seed_kernels
               if k not in seeded and queries.kernel_exists(store, k)
               and all(c["kernel_id"] != k for c in chosen)]
    keys = {queries.kernel_source_key(store, s["kernel_id"]) for s in chosen}
    for pinned in queries.pinned_kernels(store, problem_id):
        key = queries.kernel_source_key(store, pinned)
        if key not in keys:
            keys.add(key)
            chosen.append({"kernel_id": pinned, "cell": "", "reason": "pinned by you"})
    return chosen


def combine_pair(store: Store, session_id: int, settings: SearchSettings,
                 round_row: dict) -> tuple[int, int] | None:
    """The two kernels a round's combine call merges, when one is due: the archive's fastest
    and the fastest elite of another lineage, a pair not combined before."""
    if not settings.combine or round_row["n"] < 1 or \
            queries.round_has_combine(store, round_row["id"]):
        return None
    ranked = archive.elites(archive_entries(store, session_id, settings))
    if len(ranked) < 2:
        return None
    best, done = ranked[0], queries.combined_pairs(store, session_id)
    root = queries.lineage_root(store, best.kernel_id)
    for other in ranked[1:]:
        if queries.lineage_root(store, other.kernel_id) != root and \
                frozenset((best.kernel_id, other.kernel_id)) not in done:
            return best.kernel_id, other.kernel_id
    return None


def check_budget(settings: SearchSettings, tokens: int, dollars: float) -> None:
    """Raise Stop when the session has used its token or dollar budget."""
    if settings.budget_tokens is not None and tokens >= settings.budget_tokens:
        raise Stop(f"budget reached: {tokens:,} of {settings.budget_tokens:,} tokens used "
                   f"(resume with a larger --budget-tokens)")
    if settings.budget_usd is not None and dollars >= settings.budget_usd:
        raise Stop(f"budget reached: ${dollars:.2f} of ${settings.budget_usd:.2f} spent "
                   f"(resume with a larger --budget-usd)")


def limit_reached(settings: SearchSettings, run_s: float, gpu_s: float) -> str | None:
    """Why a wall-clock or GPU-time budget stops the session now, or None."""
    if settings.budget_wall_s is not None and run_s >= settings.budget_wall_s:
        return (f"budget reached: this run took {run_s / 60:.1f} of "
                f"{settings.budget_wall_s / 60:g} minutes (resume to continue)")
    if settings.budget_gpu_s is not None and gpu_s >= settings.budget_gpu_s:
        return (f"budget reached: verification used {gpu_s / 60:.1f} of "
                f"{settings.budget_gpu_s / 60:g} GPU minutes (resume with a larger "
                "--budget-gpu-minutes)")
    return None


def goal_reached(store: Store, session_id: int, settings: SearchSettings) -> str | None:
    """Why the session is done early: a kernel reached the set fraction of the roofline."""
    if settings.stop_at_roofline is None:
        return None
    best = queries.best_roofline_fraction(store, session_id)
    if best and best[1] >= settings.stop_at_roofline:
        return (f"finished early: kernel {best[0]} runs at {100 * best[1]:.0f}% of the "
                f"roofline floor's speed (goal {100 * settings.stop_at_roofline:.0f}%)")
    return None


def archive_summary(store: Store, session_id: int, settings: SearchSettings) -> dict:
    """The archive as it stands (each cell's best kernel, fastest first) and, per round, the
    seeds with the reason each was chosen: what the app's archive view shows."""
    cells = [{"cell": e.cell_label, "kernel_id": e.kernel_id, "time_ms": e.time_ms,
              "ci95_ms": [e.ci_lo, e.ci_hi]}
             for e in archive.elites(archive_entries(store, session_id, settings))]
    rounds = [{"n": r["n"], "seeds": json.loads(r["seed_reasons"] or "[]") or
               [{"kernel_id": k, "cell": "", "reason": "(reason not recorded)"}
                for k in queries.round_seeds(r)]}
              for r in store.rows("rounds", "session_id = ?", [session_id], order_by="n")]
    return {"cells": cells, "rounds": rounds}
