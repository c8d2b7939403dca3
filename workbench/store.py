"""Everything the workbench does lives in SQLite (default ./kernels.db), through sqlite-utils.

Schema changes are sqlite-utils `Migrations` (workbench/schema.py): a database made by an older
version upgrades in place when opened. WAL and foreign keys are set on every connection; each thread gets its own
connection (sqlite3 objects must not cross threads).
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import sqlite_utils

from workbench import verdict_seal
from workbench.schema import migrations
from workbench.store_evidence import EvidenceQueries
from workbench.gpu.verdict import STATUSES
from workbench.store_errors import (MAX_ID, StoreError, check_openable, explain, is_read_only,
                                    newer_schema)

DB_ENV = "KERNEL_WORKBENCH_DB"

IDEA_STATUSES = ("proposed", "approved", "edited", "vetoed", "implemented")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def default_db_path() -> Path:
    return Path(os.environ.get(DB_ENV) or "kernels.db")


def _connect(path: Path, read_only: bool = False) -> sqlite_utils.Database:
    if read_only:
        db = sqlite_utils.Database(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                                   check_same_thread=False))
        verdict_seal.register(db.conn)
        return db
    db = sqlite_utils.Database(path)
    verdict_seal.register(db.conn)
    # The busy timeout first: switching a fresh file to WAL takes a lock another process
    # opening it at the same moment may hold.
    db.execute("PRAGMA busy_timeout=10000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


@contextmanager
def _speaking(path: Path) -> Iterator[None]:
    """sqlite3's operational errors (full disk, read-only, corrupt, locked) as one-line
    StoreErrors; constraint violations stay what they are (they are bugs, not the user's)."""
    try:
        yield
    except sqlite3.IntegrityError:
        raise
    except (sqlite3.OperationalError, sqlite3.DatabaseError) as e:
        raise explain(path, e) from None


class Store(EvidenceQueries):
    """The workbench database. Safe to share between threads: each gets its own connection.

    Opening it raises StoreError (one line) for a path that cannot hold a database, a damaged
    file or one written by a newer version. A file this process may not write opens read-only:
    reading works, a write raises StoreError.
    """

    def __init__(self, path: str | Path | None = None, migrate: bool = True):
        self.path = Path(path) if path is not None else default_db_path()
        check_openable(self.path)
        self.read_only = is_read_only(self.path)
        self._local = threading.local()
        with _speaking(self.path):
            if migrate or self.read_only:
                self._migrate()
            else:
                self.db.execute("select 1")

    def _migrate(self) -> None:
        """Apply pending migrations under the write lock: two processes opening a fresh file
        at once take turns, and the second finds nothing left to do."""
        db = self.db
        known = {m.name for m in migrations._migrations}
        unknown = [m.name for m in migrations.applied(db) if m.name not in known]
        if unknown:
            raise newer_schema(self.path, unknown)
        if not migrations.pending(db):
            return
        if self.read_only:
            raise StoreError(f"{self.path} is read-only and needs a schema upgrade: make it "
                             "writable (chmod u+w) and open it once")
        with self.transaction():
            migrations.apply(db)

    @property
    def db(self) -> sqlite_utils.Database:
        db = getattr(self._local, "db", None)
        if db is None:
            with _speaking(self.path):
                db = self._local.db = _connect(self.path, self.read_only)
        return db

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """Writes that belong together: all land or none do.

        BEGIN IMMEDIATE takes the write lock up front (waiting up to busy_timeout): a deferred
        transaction that reads first (sqlite-utils reads the schema before an insert) fails at
        once with "database is locked" when another connection wrote in between.
        """
        db = self.db
        if db.conn.in_transaction:
            with db.atomic():   # nested: a savepoint
                yield db
            return
        with _speaking(self.path):
            db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.conn.in_transaction:
                db.execute("ROLLBACK")
            raise
        with _speaking(self.path):
            db.execute("COMMIT")

    # -- generic helpers -------------------------------------------------------------------
    def get(self, table: str, row_id: int) -> dict[str, Any]:
        return self.db[table].get(row_id)

    def rows(self, table: str, where: str | None = None, params: Any = None,
             order_by: str = "id") -> list[dict[str, Any]]:
        return list(self.db[table].rows_where(where, params or [], order_by=order_by))

    def insert(self, table: str, row: dict[str, Any]) -> int:
        row = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in row.items()}
        row.setdefault("created_at", now())
        with _speaking(self.path):
            return self.db[table].insert(row).last_pk

    def update(self, table: str, row_id: int, **fields: Any) -> None:
        fields = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v)
                  for k, v in fields.items()}
        with _speaking(self.path):
            self.db[table].update(row_id, fields)

    # -- problems ---------------------------------------------------------------------------
    def upsert_problem(self, problem) -> int:
        """Record a workbench.problems.Problem; the same source maps to the same row."""
        found = self.rows("problems", "hash = ?", [problem.hash])
        if found:
            return found[0]["id"]
        return self.insert("problems", {
            "name": problem.name, "path": str(problem.path), "hash": problem.hash,
            "source": problem.source, "family": problem.family, "dtype": problem.dtype,
            "flops": problem.flops, "min_bytes": problem.min_bytes, "atol": problem.atol,
            "rtol": problem.rtol})

    # -- sessions, rounds, ideas --------------------------------------------------------------
    def create_session(self, problem_id: int, provider: str | None, model: str | None,
                       settings: dict, env: dict | None = None,
                       base_url: str | None = None) -> int:
        env = env or {}
        return self.insert("sessions", {
            "problem_id": problem_id, "provider": provider, "model": model,
            "base_url": base_url, "settings": settings, "status": "running",
            "gpu": env.get("gpu"), "driver": env.get("driver"),
            "torch_version": env.get("torch"), "cuda_version": env.get("cuda"),
            "started_at": now()})

    def settings(self, session_id: int) -> dict:
        return json.loads(self.get("sessions", session_id)["settings"] or "{}")

    def create_round(self, session_id: int, n: int) -> int:
        return self.insert("rounds", {"session_id": session_id, "n": n, "status": "ideating",
                                      "started_at": now()})

    def add_idea(self, round_id: int, text: str, author: str = "llm", kind: str | None = None,
                 seed_kernel_id: int | None = None, llm_call_id: int | None = None,
                 status: str = "proposed") -> int:
        if status not in IDEA_STATUSES:
            raise ValueError(f"idea status {status!r} is not one of {IDEA_STATUSES}")
        from workbench.source_key import text_key

        return self.insert("ideas", {
            "round_id": round_id, "text": text, "author": author, "kind": kind,
            "seed_kernel_id": seed_kernel_id, "llm_call_id": llm_call_id, "status": status,
            "updated_at": now(), "text_key": text_key(text)})

    def set_idea_status(self, idea_id: int, status: str, text: str | None = None) -> None:
        if status not in IDEA_STATUSES:
            raise ValueError(f"idea status {status!r} is not one of {IDEA_STATUSES}")
        fields: dict[str, Any] = {"status": status, "updated_at": now()}
        if text is not None:
            from workbench.source_key import text_key

            fields["text"] = text
            fields["text_key"] = text_key(text)
        self.update("ideas", idea_id, **fields)

    # -- kernels, builds, evaluations ---------------------------------------------------------
    def add_kernel(self, problem_id: int, source: str, session_id: int | None = None,
                   idea_id: int | None = None, parent_id: int | None = None,
                   origin: str = "llm", llm_call_id: int | None = None,
                   attempt: int = 0, duplicate_of: int | None = None) -> int:
        import hashlib

        from workbench.source_key import source_key

        return self.insert("kernels", {
            "problem_id": problem_id, "session_id": session_id, "idea_id": idea_id,
            "parent_id": parent_id, "source": source,
            "hash": hashlib.sha256(source.encode()).hexdigest(), "origin": origin,
            "llm_call_id": llm_call_id, "attempt": attempt, "source_key": source_key(source),
            "duplicate_of": duplicate_of})

    def set_kernel_flags(self, kernel_id: int, *, pruned: bool | None = None,
                         pinned: bool | None = None, cleared: bool | None = None) -> None:
        fields = {k: int(v) for k, v in (("pruned", pruned), ("pinned", pinned),
                                         ("cleared", cleared)) if v is not None}
        if not fields:
            return
        with self.transaction():
            # The clearance is sealed with each verdict: re-seal the ones that held before it.
            before = self.get("kernels", kernel_id)
            held = [r for r in self.rows("evaluations", "kernel_id = ?", [kernel_id])
                    if verdict_seal.row_intact(r, before)] if "cleared" in fields else []
            self.update("kernels", kernel_id, **fields)
            kernel = self.get("kernels", kernel_id)
            for row in held:
                self.update("evaluations", row["id"], signature=verdict_seal.seal(row, kernel))

    def sealed(self, evaluation: dict) -> bool:
        """Whether an evaluations row carries the verifier's seal over it and its kernel."""
        return verdict_seal.row_intact(evaluation, self.get("kernels", evaluation["kernel_id"]))

    def add_build(self, kernel_id: int, ok: bool, seconds: float | None, cache_hit: bool,
                  cache_key: str | None, log: str, extensions: list | None = None) -> int:
        return self.insert("builds", {"kernel_id": kernel_id, "ok": int(ok), "seconds": seconds,
                                      "cache_hit": int(cache_hit), "cache_key": cache_key,
                                      "log": log, "extensions": extensions or []})

    def add_evaluation(self, kernel_id: int, verdict: dict, build_id: int | None = None) -> int:
        """Store a verdict (the JSON object `kernel-workbench eval --json` prints)."""
        if verdict.get("status") is not None and verdict["status"] not in STATUSES:
            raise ValueError(f"verdict status {verdict['status']!r} is not one of {STATUSES}")
        ci = verdict.get("ci95_ms") or [None, None]
        with self.transaction():
            evaluation_id = self._insert_evaluation(kernel_id, build_id, verdict, ci)
            # Sealed as stored (read back: SQLite's column affinities may change a value's type).
            self.update("evaluations", evaluation_id, signature=verdict_seal.seal(
                self.get("evaluations", evaluation_id), self.get("kernels", kernel_id)))
        return evaluation_id

    def _insert_evaluation(self, kernel_id: int, build_id: int | None, verdict: dict,
                           ci: list) -> int:
        return self.insert("evaluations", {
            "kernel_id": kernel_id, "build_id": build_id, "status": verdict["status"],
            "gpu": verdict.get("gpu"), "trials": verdict.get("trials"),
            "atol": verdict.get("atol"), "rtol": verdict.get("rtol"),
            "max_abs_err": verdict.get("max_abs_err"), "max_rel_err": verdict.get("max_rel_err"),
            "trial_errors": verdict.get("trial_errors") or [],
            "time_ms": verdict.get("time_ms"), "ci95_lo_ms": ci[0], "ci95_hi_ms": ci[1],
            "samples": verdict.get("samples") or {},
            "ref_eager_ms": verdict.get("ref_eager_ms"),
            "ref_compile_ms": verdict.get("ref_compile_ms"),
            "speedup_eager": verdict.get("speedup_eager"),
            "speedup_compile": verdict.get("speedup_compile"),
            "floor_ms": verdict.get("floor_ms"), "flags": verdict.get("flags") or [],
            "error": verdict.get("error"), "verdict": verdict,
            "reuse_key": verdict.get("reuse_key")})

    def copy_evaluation(self, evaluation: dict, kernel_id: int, reused: bool = False) -> int:
        """A verdict copied onto another kernel row of the same source (a fork's copy, or a
        reused verdict: then `reused_from` names the original): sealed again only when the
        original's seal holds, so a copy never launders a forged row."""
        row = {c: v for c, v in evaluation.items()
               if c not in ("id", "build_id", "signature", "trusted", "reused_from")}
        if reused:
            row["reused_from"] = evaluation.get("reused_from") or evaluation["id"]
        with self.transaction():
            copy_id = self.insert("evaluations", {**row, "kernel_id": kernel_id})
            if self.sealed(self.get("evaluations", evaluation["id"])):
                self.update("evaluations", copy_id, signature=verdict_seal.seal(
                    self.get("evaluations", copy_id), self.get("kernels", kernel_id)))
        return copy_id

    def reusable_evaluation(self, reuse_key: str, statuses: tuple[str, ...]) -> dict | None:
        """The newest sealed evaluation stored under this reuse key (see
        EvalRequest.reuse_key) with one of these statuses, or None."""
        marks = ", ".join("?" * len(statuses))
        for row in self.db["evaluations"].rows_where(
                f"reuse_key = ? and status in ({marks})", [reuse_key, *statuses],
                order_by="id desc", limit=5):
            if self.sealed(row):
                return row
        return None

    def latest_evaluation(self, kernel_id: int) -> dict | None:
        """The newest evaluation row, with `trusted`: whether its verdict seal holds."""
        found = self.rows("evaluations", "kernel_id = ?", [kernel_id], order_by="id desc")
        if not found:
            return None
        return {**found[0], "trusted": self.sealed(found[0])}

    def kernel_problem(self, kernel_id: int) -> dict:
        return next(self.db.query("select p.* from problems p join kernels k on "
                                  "k.problem_id = p.id where k.id = ?", [kernel_id]))

    def add_llm_call(self, **fields: Any) -> int:
        return self.insert("llm_calls", fields)

    def add_export(self, kernel_id: int, path: str) -> int:
        return self.insert("exports", {"kernel_id": kernel_id, "path": path})

    # -- reading for export and reports ------------------------------------------------------
    def find(self, table: str, row_id: int) -> dict[str, Any] | None:
        """A row by id, or None when there is none (ids past SQLite's range included)."""
        if not 0 <= row_id <= MAX_ID:
            return None
        found = self.rows(table, "id = ?", [row_id])
        return found[0] if found else None

    def latest_build(self, kernel_id: int) -> dict | None:
        found = self.rows("builds", "kernel_id = ?", [kernel_id], order_by="id desc")
        return found[0] if found else None

    def has_compiled(self, kernel_id: int) -> bool:
        """Whether any build of the kernel succeeded."""
        return bool(self.rows("builds", "kernel_id = ? and ok = 1", [kernel_id]))

    def kernel_round(self, kernel_id: int) -> int | None:
        """The round number of the idea a kernel implements (None for kernels without one)."""
        row = next(self.db.query(
            "select r.n from kernels k join ideas i on i.id = k.idea_id "
            "join rounds r on r.id = i.round_id where k.id = ?", [kernel_id]), None)
        return row["n"] if row else None

    def best_kernel(self, session_id: int) -> dict[str, Any] | None:
        """The session's best kernel: the one definition `run`, `report` and the app show.

        The highest speedup over eager (then the lowest time, then the oldest) among kernels
        whose latest verdict is correct, or flagged and cleared by a person; never a pruned
        kernel, nor an unverified one (compiled without a GPU: nothing was checked), nor one
        whose verdict the verifier did not seal (workbench.verdict_seal).
        """
        return next(self.db.query(
            "select k.id, e.status, e.time_ms, e.speedup_eager from kernels k "
            "join evaluations e on e.id = (select max(id) from evaluations where kernel_id = k.id) "
            "where k.session_id = ? and k.pruned = 0 and (e.status = 'correct' or "
            f"(e.status = 'flagged' and k.cleared = 1)) and {verdict_seal.sql('e')} "
            "order by coalesce(e.speedup_eager, 0) desc, e.time_ms is null, e.time_ms, k.id "
            "limit 1", [session_id]), None)

    def session_kernels(self, session_id: int) -> list[dict[str, Any]]:
        """A session's kernels with their round number and latest evaluation's figures."""
        return list(self.db.query(
            "select k.id, k.problem_id, k.idea_id, k.parent_id, k.pruned, k.pinned, k.cleared, "
            "r.n as round_n, e.id as evaluation_id, e.status, e.time_ms, e.ci95_lo_ms, "
            "e.ci95_hi_ms, e.ref_eager_ms, e.ref_compile_ms, e.speedup_eager, "
            "e.speedup_compile, e.floor_ms, e.flags, "
            f"(e.id is null or {verdict_seal.sql('e')}) as trusted "
            "from kernels k left join ideas i on i.id = k.idea_id "
            "left join rounds r on r.id = i.round_id "
            "left join evaluations e on e.id = "
            "(select max(id) from evaluations where kernel_id = k.id) "
            "where k.session_id = ? order by k.id", [session_id]))

