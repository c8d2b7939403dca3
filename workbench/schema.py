"""The store's schema, as sqlite-utils `Migrations` applied in the order written here: a database
made by an older version upgrades in place when opened (workbench.store applies them). New
migrations go at the end, whatever their number."""
from __future__ import annotations

import sqlite_utils
from sqlite_utils.migrations import Migrations

migrations = Migrations("kernel-workbench")


@migrations()
def m001_core(db: sqlite_utils.Database) -> None:
    db["problems"].create({
        "id": int, "name": str, "path": str, "hash": str, "source": str, "family": str,
        "dtype": str, "flops": int, "min_bytes": int, "atol": float, "rtol": float,
        "created_at": str}, pk="id", not_null={"name", "hash", "source"})
    db["problems"].create_index(["hash"], unique=True)
    db["sessions"].create({
        "id": int, "problem_id": int, "provider": str, "model": str, "base_url": str,
        "settings": str, "status": str, "gpu": str, "driver": str, "torch_version": str,
        "cuda_version": str, "started_at": str, "ended_at": str, "stop_reason": str},
        pk="id", foreign_keys=[("problem_id", "problems", "id")], not_null={"problem_id"})
    db["rounds"].create({
        "id": int, "session_id": int, "n": int, "status": str, "started_at": str,
        "ended_at": str}, pk="id", foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "n"})
    db["rounds"].create_index(["session_id", "n"], unique=True)
    db["kernels"].create({
        "id": int, "problem_id": int, "session_id": int, "idea_id": int, "parent_id": int,
        "source": str, "hash": str, "origin": str, "attempt": int, "pruned": int,
        "pinned": int, "cleared": int, "created_at": str}, pk="id",
        foreign_keys=[("problem_id", "problems", "id"), ("session_id", "sessions", "id"),
                      ("parent_id", "kernels", "id")],
        not_null={"problem_id", "source", "hash"}, defaults={"pruned": 0, "pinned": 0,
                                                              "cleared": 0, "attempt": 0})
    db["ideas"].create({
        "id": int, "round_id": int, "seed_kernel_id": int, "text": str, "kind": str,
        "author": str, "status": str, "created_at": str, "updated_at": str}, pk="id",
        foreign_keys=[("round_id", "rounds", "id"), ("seed_kernel_id", "kernels", "id")],
        not_null={"round_id", "text", "author", "status"})
    # kernels.idea_id points at ideas, created after kernels: add the constraint now.
    db["kernels"].add_foreign_key("idea_id", "ideas", "id")
    db["builds"].create({
        "id": int, "kernel_id": int, "ok": int, "seconds": float, "cache_hit": int,
        "cache_key": str, "log": str, "created_at": str}, pk="id",
        foreign_keys=[("kernel_id", "kernels", "id")], not_null={"kernel_id"})
    db["evaluations"].create({
        "id": int, "kernel_id": int, "build_id": int, "status": str, "gpu": str,
        "trials": int, "atol": float, "rtol": float, "max_abs_err": float,
        "max_rel_err": float, "trial_errors": str, "time_ms": float, "ci95_lo_ms": float,
        "ci95_hi_ms": float, "samples": str, "ref_eager_ms": float, "ref_compile_ms": float,
        "speedup_eager": float, "speedup_compile": float, "floor_ms": float, "flags": str,
        "error": str, "verdict": str, "created_at": str}, pk="id",
        foreign_keys=[("kernel_id", "kernels", "id"), ("build_id", "builds", "id")],
        not_null={"kernel_id", "status"})
    db["exports"].create({"id": int, "kernel_id": int, "path": str, "created_at": str},
                         pk="id", foreign_keys=[("kernel_id", "kernels", "id")])
    for table, cols in (("kernels", ["session_id"]), ("kernels", ["idea_id"]),
                        ("ideas", ["round_id"]), ("evaluations", ["kernel_id"]),
                        ("builds", ["kernel_id"])):
        db[table].create_index(cols)


@migrations()
def m002_llm_calls(db: sqlite_utils.Database) -> None:
    db["llm_calls"].create({
        "id": int, "session_id": int, "round_id": int, "provider": str, "model": str,
        "purpose": str, "prompt": str, "response": str, "tokens_in": int, "tokens_out": int,
        "tokens_reasoning": int, "cost_usd": float, "latency_s": float, "error": str,
        "created_at": str}, pk="id",
        foreign_keys=[("session_id", "sessions", "id"), ("round_id", "rounds", "id")])
    db["llm_calls"].create_index(["session_id"])
    db["ideas"].add_column("llm_call_id", int, fk="llm_calls", fk_col="id")
    db["kernels"].add_column("llm_call_id", int, fk="llm_calls", fk_col="id")


@migrations()
def m003_build_sources(db: sqlite_utils.Database) -> None:
    # The sources load_inline actually received (after f-strings and variables), for export.
    db["builds"].add_column("extensions", str)


@migrations()
def m004_search(db: sqlite_utils.Database) -> None:
    # The search engine resumes from the store: a round's seeds (kernel ids, null for the
    # reference) and, per LLM call, what it was for and how it failed (api | no_code | no_ideas).
    db["rounds"].add_column("seeds", str)
    db["llm_calls"].add_column("idea_id", int, fk="ideas", fk_col="id")
    db["llm_calls"].add_column("kernel_id", int, fk="kernels", fk_col="id")
    db["llm_calls"].add_column("error_kind", str)


@migrations()
def m005_sessions_rounds_created_at(db: sqlite_utils.Database) -> None:
    # Store.insert stamps created_at on every row; sessions and rounds lacked the column.
    for table in ("sessions", "rounds"):
        if "created_at" not in db[table].columns_dict:
            db[table].add_column("created_at", str)


@migrations()
def m020_profiles(db: sqlite_utils.Database) -> None:
    # Hardware evidence per kernel, one row per kind (resources | runtime | bottleneck | ncu |
    # change), so new kinds need no schema change: data is JSON, summary one line.
    db["profiles"].create({
        "id": int, "kernel_id": int, "evaluation_id": int, "kind": str, "summary": str,
        "data": str, "created_at": str}, pk="id",
        foreign_keys=[("kernel_id", "kernels", "id"), ("evaluation_id", "evaluations", "id")],
        not_null={"kernel_id", "kind"})
    db["profiles"].create_index(["kernel_id", "kind"])


@migrations()
def m021_evidence_choices(db: sqlite_utils.Database) -> None:
    # What the engineer attaches to the next prompt of a lineage (kinds of evidence, a note),
    # and what each LLM call was actually given.
    db["evidence_choices"].create({
        "id": int, "kernel_id": int, "attached": str, "note": str, "created_at": str},
        pk="id", foreign_keys=[("kernel_id", "kernels", "id")], not_null={"kernel_id"})
    db["evidence_choices"].create_index(["kernel_id"])
    db["llm_calls"].add_column("evidence", str)


@migrations()
def m030_population(db: sqlite_utils.Database) -> None:
    # Kernels keyed by their normalised source (comments and layout out): a kernel the session
    # already has is stored as a duplicate_of it and neither verified nor seeded again. Ideas
    # restated by a later ideation are merged into the first as echoes. A round records why
    # each seed was chosen (the quality-diversity archive's cell and reason).
    from workbench.source_key import source_key, text_key

    db["kernels"].add_column("source_key", str)
    db["kernels"].add_column("duplicate_of", int, fk="kernels", fk_col="id")
    for row in list(db.query("select id, source from kernels")):
        db["kernels"].update(row["id"], {"source_key": source_key(row["source"])})
    db["kernels"].create_index(["session_id", "source_key"])
    db["idea_echoes"].create({
        "id": int, "idea_id": int, "round_id": int, "seed_kernel_id": int, "llm_call_id": int,
        "text": str, "created_at": str}, pk="id",
        foreign_keys=[("idea_id", "ideas", "id"), ("round_id", "rounds", "id"),
                      ("seed_kernel_id", "kernels", "id"), ("llm_call_id", "llm_calls", "id")])
    db["idea_echoes"].create_index(["idea_id"])
    db["ideas"].add_column("text_key", str)
    for row in list(db.query("select id, text from ideas")):
        db["ideas"].update(row["id"], {"text_key": text_key(row["text"])})
    db["rounds"].add_column("seed_reasons", str)


@migrations()
def m031_lessons_forks(db: sqlite_utils.Database) -> None:
    # Lessons an engineer writes on reviewing a kernel, shown to later ideation of the same op
    # family in any session; forks of a session at a round; a combined kernel's second parent.
    db["lessons"].create({
        "id": int, "family": str, "text": str, "kernel_id": int, "session_id": int,
        "created_at": str}, pk="id",
        foreign_keys=[("kernel_id", "kernels", "id"), ("session_id", "sessions", "id")],
        not_null={"family", "text"})
    db["lessons"].create_index(["family"])
    db["sessions"].add_column("forked_from", int, fk="sessions", fk_col="id")
    db["sessions"].add_column("fork_round", int)
    db["kernels"].add_column("second_parent_id", int, fk="kernels", fk_col="id")
    # A fork copies the calls that shaped its rounds (the engine resumes from them); their
    # tokens and dollars belong to the original session, not the fork.
    db["llm_calls"].add_column("copied_from", int, fk="llm_calls", fk_col="id")


@migrations()
def m070_verdict_seals(db: sqlite_utils.Database) -> None:
    # An HMAC over each evaluation row (workbench.verdict_seal): rows without a valid one were
    # not stored by the verifier and read as untrusted. Rows from before stay unsealed: they
    # cannot be told apart from forged ones, so they read as untrusted until re-verified.
    db["evaluations"].add_column("signature", str)


@migrations()
def m071_estimated_tokens(db: sqlite_utils.Database) -> None:
    # 1 where the server reported no usage and the tokens (and cost) were estimated from the
    # text's length, so a token budget still holds and reports can say so.
    db["llm_calls"].add_column("tokens_estimated", int)


@migrations()
def m010_verdict_reuse(db: sqlite_utils.Database) -> None:
    # Same source, same verdict: the key a verdict can be found by again (EvalRequest.reuse_key),
    # and, on a reused verdict's row, the evaluation it repeats.
    db["evaluations"].add_column("reuse_key", str)
    db["evaluations"].add_column("reused_from", int, fk="evaluations", fk_col="id")
    db["evaluations"].create_index(["reuse_key"])
