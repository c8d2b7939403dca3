"""The SQLite store: real databases in tmp_path, no mocks.

Every table round-trips through the Store methods, foreign keys and WAL hold on every thread's
connection, related writes land together or not at all, and a database made by an older schema
upgrades in place when opened.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlite_utils

from workbench import store as store_module
from workbench.gpu import verdict as verdict_module
from workbench.gpu import verifier
from workbench.problems import load_problem
from workbench.store import IDEA_STATUSES, Store, default_db_path, migrations

ALL_MIGRATIONS = ["m001_core", "m002_llm_calls", "m003_build_sources", "m004_search",
                  "m005_sessions_rounds_created_at", "m020_profiles", "m021_evidence_choices",
                  "m030_population", "m031_lessons_forks", "m070_verdict_seals", "m071_estimated_tokens",
                  "m010_verdict_reuse"]
KERNEL_SOURCE = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture(scope="module")
def silu():
    return load_problem("silu", smoke=False)


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "kernels.db")


def in_thread(fn):
    """Run fn in a fresh thread; return its result or re-raise its exception here."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test thread
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    return box["value"]


def correct_verdict() -> dict:
    v = verdict_module.empty("correct")
    v.update(verified=True, compile_s=12.5, cache_hit=False, cache_key="abc123",
             extensions=[{"name": "silu_ext", "cuda_sources": "__global__ void k() {}"}],
             build_log="ninja: build ok", trials=6, atol=1e-4, rtol=1e-4,
             max_abs_err=3.0e-7, max_rel_err=1.5e-6,
             trial_errors=[{"trial": 0, "distribution": "normal", "ok": True,
                            "max_abs_err": 3.0e-7, "max_rel_err": 1.5e-6, "reason": None}],
             time_ms=0.25, ci95_ms=[0.24, 0.26], ref_eager_ms=0.5, ref_compile_ms=0.4,
             speedup_eager=2.0, speedup_compile=1.6, floor_ms=0.1, roofline_fraction=0.4,
             samples={"candidate": [0.25, 0.24], "eager": [0.5], "compile": [0.4]},
             flags=[{"kind": "note", "reason": "just a test"}], gpu="NVIDIA H200",
             phase_s={"compile": 12.5})
    return v


# -- round trips -----------------------------------------------------------------------------

def test_every_table_round_trips(store, silu):
    pid = store.upsert_problem(silu)
    p = store.get("problems", pid)
    assert (p["name"], p["path"], p["hash"], p["source"], p["family"], p["dtype"]) == (
        silu.name, str(silu.path), silu.hash, silu.source, silu.family, silu.dtype)
    assert (p["flops"], p["min_bytes"], p["atol"], p["rtol"]) == (
        silu.flops, silu.min_bytes, silu.atol, silu.rtol)
    assert p["created_at"]

    settings = {"rounds": 3, "ideas_per_round": 4, "nested": {"temperature": 0.7}}
    env = {"gpu": "NVIDIA H200", "driver": "550.1", "torch": "2.14.1", "cuda": "12.8"}
    sid = store.create_session(pid, "openai", "gpt-x", settings, env=env,
                               base_url="http://localhost:1234")
    s = store.get("sessions", sid)
    assert (s["problem_id"], s["provider"], s["model"], s["base_url"], s["status"]) == (
        pid, "openai", "gpt-x", "http://localhost:1234", "running")
    assert (s["gpu"], s["driver"], s["torch_version"], s["cuda_version"]) == (
        "NVIDIA H200", "550.1", "2.14.1", "12.8")
    assert json.loads(s["settings"]) == settings
    assert store.settings(sid) == settings
    assert s["started_at"] and s["created_at"]

    rid = store.create_round(sid, 1)
    r = store.get("rounds", rid)
    assert (r["session_id"], r["n"], r["status"]) == (sid, 1, "ideating")
    assert r["started_at"] and r["created_at"]

    cid = store.add_llm_call(session_id=sid, round_id=rid, provider="openai", model="gpt-x",
                             purpose="ideas", prompt="write ideas", response="1. fuse",
                             tokens_in=100, tokens_out=20, tokens_reasoning=5, cost_usd=0.01,
                             latency_s=1.5, error=None, error_kind=None)
    c = store.get("llm_calls", cid)
    assert {k: c[k] for k in ("session_id", "round_id", "provider", "model", "purpose",
                              "prompt", "response", "tokens_in", "tokens_out",
                              "tokens_reasoning", "cost_usd", "latency_s", "error",
                              "error_kind")} == {
        "session_id": sid, "round_id": rid, "provider": "openai", "model": "gpt-x",
        "purpose": "ideas", "prompt": "write ideas", "response": "1. fuse", "tokens_in": 100,
        "tokens_out": 20, "tokens_reasoning": 5, "cost_usd": 0.01, "latency_s": 1.5,
        "error": None, "error_kind": None}
    assert c["created_at"]

    iid = store.add_idea(rid, "fuse the sigmoid into the multiply", author="llm", kind="fusion",
                         llm_call_id=cid)
    i = store.get("ideas", iid)
    assert (i["round_id"], i["text"], i["author"], i["kind"], i["status"], i["llm_call_id"],
            i["seed_kernel_id"]) == (rid, "fuse the sigmoid into the multiply", "llm", "fusion",
                                     "proposed", cid, None)
    assert i["created_at"] and i["updated_at"]

    kid = store.add_kernel(pid, KERNEL_SOURCE, session_id=sid, idea_id=iid, origin="llm",
                           llm_call_id=cid, attempt=2)
    k = store.get("kernels", kid)
    assert (k["problem_id"], k["session_id"], k["idea_id"], k["parent_id"], k["source"],
            k["origin"], k["llm_call_id"], k["attempt"]) == (
        pid, sid, iid, None, KERNEL_SOURCE, "llm", cid, 2)
    assert (k["pruned"], k["pinned"], k["cleared"]) == (0, 0, 0)
    assert len(k["hash"]) == 64
    child = store.add_kernel(pid, KERNEL_SOURCE + "# v2\n", session_id=sid, parent_id=kid)
    assert store.get("kernels", child)["parent_id"] == kid
    store.set_kernel_flags(kid, pinned=True, pruned=False)
    assert (store.get("kernels", kid)["pinned"], store.get("kernels", kid)["pruned"]) == (1, 0)

    # llm_calls columns added by m004 point back at the idea and kernel
    store.update("llm_calls", cid, idea_id=iid, kernel_id=kid)
    assert (store.get("llm_calls", cid)["idea_id"],
            store.get("llm_calls", cid)["kernel_id"]) == (iid, kid)
    store.update("rounds", rid, seeds=[kid, None])
    assert json.loads(store.get("rounds", rid)["seeds"]) == [kid, None]
    seeded = store.add_idea(rid, "seeded", seed_kernel_id=kid, status="approved")
    assert store.get("ideas", seeded)["seed_kernel_id"] == kid
    store.set_idea_status(seeded, "edited", text="seeded, edited")
    assert (store.get("ideas", seeded)["status"],
            store.get("ideas", seeded)["text"]) == ("edited", "seeded, edited")

    # A plain build (add_build) and one recorded with its evaluation (verifier.record)
    exts = [{"name": "a", "cpp_sources": "int f();"}]
    bid = store.add_build(kid, ok=False, seconds=3.25, cache_hit=True, cache_key="k1",
                          log="error: nope", extensions=exts)
    b = store.get("builds", bid)
    assert (b["kernel_id"], b["ok"], b["seconds"], b["cache_hit"], b["cache_key"], b["log"]) == (
        kid, 0, 3.25, 1, "k1", "error: nope")
    assert json.loads(b["extensions"]) == exts
    assert b["created_at"]

    v = correct_verdict()
    eid = verifier.record(store, kid, v)
    e = store.get("evaluations", eid)
    b2 = store.latest_build(kid)
    assert b2["id"] != bid and e["build_id"] == b2["id"]
    assert (b2["kernel_id"], b2["ok"], b2["seconds"], b2["cache_hit"], b2["cache_key"],
            b2["log"]) == (kid, 1, 12.5, 0, "abc123", "ninja: build ok")
    assert json.loads(b2["extensions"]) == v["extensions"]
    assert (e["kernel_id"], e["status"], e["gpu"], e["trials"], e["atol"], e["rtol"]) == (
        kid, "correct", "NVIDIA H200", 6, 1e-4, 1e-4)
    assert (e["max_abs_err"], e["max_rel_err"], e["time_ms"], e["ci95_lo_ms"],
            e["ci95_hi_ms"]) == (3.0e-7, 1.5e-6, 0.25, 0.24, 0.26)
    assert (e["ref_eager_ms"], e["ref_compile_ms"], e["speedup_eager"], e["speedup_compile"],
            e["floor_ms"], e["error"]) == (0.5, 0.4, 2.0, 1.6, 0.1, None)
    assert json.loads(e["trial_errors"]) == v["trial_errors"]
    assert json.loads(e["samples"]) == v["samples"]
    assert json.loads(e["flags"]) == v["flags"]
    assert json.loads(e["verdict"]) == v
    assert e["created_at"]
    assert store.latest_evaluation(kid)["id"] == eid

    # add_evaluation without a build
    unverified = verdict_module.empty("unverified")
    eid2 = store.add_evaluation(child, unverified)
    e2 = store.get("evaluations", eid2)
    assert (e2["status"], e2["build_id"], e2["ci95_lo_ms"], e2["ci95_hi_ms"]) == (
        "unverified", None, None, None)
    assert json.loads(e2["trial_errors"]) == [] and json.loads(e2["flags"]) == []
    assert json.loads(e2["verdict"]) == unverified

    xid = store.add_export(kid, "/tmp/out/silu")
    x = store.get("exports", xid)
    assert (x["kernel_id"], x["path"]) == (kid, "/tmp/out/silu") and x["created_at"]

    # The read helpers that join across tables
    assert store.kernel_round(kid) == 1
    assert store.kernel_round(child) is None
    assert store.find("kernels", 999999) is None
    rows = store.session_kernels(sid)
    assert [r["id"] for r in rows] == [kid, child]
    assert (rows[0]["round_n"], rows[0]["evaluation_id"], rows[0]["status"],
            rows[0]["time_ms"]) == (1, eid, "correct", 0.25)
    assert (rows[1]["round_n"], rows[1]["status"]) == (None, "unverified")

    # Every table holds what was written, and nothing else
    counts = {t: store.db[t].count for t in ("problems", "sessions", "rounds", "ideas",
                                             "kernels", "builds", "evaluations", "llm_calls",
                                             "exports")}
    assert counts == {"problems": 1, "sessions": 1, "rounds": 1, "ideas": 2, "kernels": 2,
                      "builds": 2, "evaluations": 2, "llm_calls": 1, "exports": 1}


def test_same_problem_source_upserts_to_same_row(store, silu, tmp_path):
    first = store.upsert_problem(silu)
    assert store.upsert_problem(silu) == first
    assert store.upsert_problem(load_problem("silu", smoke=False)) == first
    # The same source from another path is the same problem
    copy = tmp_path / "my_silu.py"
    shutil.copy(silu.path, copy)
    assert store.upsert_problem(load_problem(copy, smoke=False)) == first
    assert store.db["problems"].count == 1
    # A different source is a different row
    changed = tmp_path / "silu_changed.py"
    changed.write_text(silu.source + "\n# changed\n")
    other = store.upsert_problem(load_problem(changed, smoke=False))
    assert other != first and store.db["problems"].count == 2


def test_duplicate_problem_hash_is_rejected_by_the_schema(store, silu):
    store.upsert_problem(silu)
    with pytest.raises(sqlite3.IntegrityError):
        store.insert("problems", {"name": "x", "hash": silu.hash, "source": silu.source})


# -- foreign keys, WAL, threads -----------------------------------------------------------------

def test_foreign_keys_enforced_on_every_connection(store, silu):
    pid = store.upsert_problem(silu)
    with pytest.raises(sqlite3.IntegrityError):
        store.add_kernel(999, KERNEL_SOURCE)
    with pytest.raises(sqlite3.IntegrityError):
        in_thread(lambda: store.add_kernel(999, KERNEL_SOURCE))
    with pytest.raises(sqlite3.IntegrityError):
        in_thread(lambda: store.create_session(12345, None, None, {}))
    kid = in_thread(lambda: store.add_kernel(pid, KERNEL_SOURCE))
    with pytest.raises(sqlite3.IntegrityError):
        in_thread(lambda: store.add_build(kid + 1, True, 1.0, False, None, ""))
    with pytest.raises(sqlite3.IntegrityError):
        store.add_evaluation(kid, verdict_module.empty("correct"), build_id=4242)
    # A fresh Store on the same file enforces them too
    with pytest.raises(sqlite3.IntegrityError):
        Store(store.path).add_kernel(999, KERNEL_SOURCE)
    assert store.db["kernels"].count == 1
    # The failed writes left no transaction open: the next write lands
    assert store.add_kernel(pid, KERNEL_SOURCE + "#") == kid + 1


def test_wal_and_foreign_keys_on_other_threads(store):
    def pragmas():
        db = store.db
        return (db.execute("PRAGMA journal_mode").fetchone()[0],
                db.execute("PRAGMA foreign_keys").fetchone()[0],
                db.execute("PRAGMA busy_timeout").fetchone()[0], id(db), id(db.conn))

    main = pragmas()
    assert main[:2] == ("wal", 1)
    assert store.db is store.db  # the same thread keeps its connection
    others = [in_thread(pragmas) for _ in range(2)]
    for other in others:
        assert other[:3] == ("wal", 1, 10000)
    # Keep references alive so ids cannot be reused while comparing
    conns = {main[4], *(o[4] for o in others)}
    assert len(conns) == 3

    seen = []

    def grab():
        seen.append(store.db)

    threads = [threading.Thread(target=grab) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(db.conn) for db in seen + [store.db]}) == 4
    assert all(db.conn is not store.db.conn for db in seen)


def test_threads_see_each_others_commits(store, silu):
    pid = store.upsert_problem(silu)
    kid = in_thread(lambda: store.add_kernel(pid, KERNEL_SOURCE))
    assert store.get("kernels", kid)["source"] == KERNEL_SOURCE
    assert in_thread(lambda: store.get("problems", pid)["hash"]) == silu.hash


# -- transactions -----------------------------------------------------------------------------

def test_record_writes_build_and_evaluation_together(store, silu):
    kid = store.add_kernel(store.upsert_problem(silu), KERNEL_SOURCE)
    eid = verifier.record(store, kid, correct_verdict())
    assert store.db["builds"].count == 1 and store.db["evaluations"].count == 1
    assert store.get("evaluations", eid)["build_id"] == store.latest_build(kid)["id"]
    # A compile error writes a failed build even without compile_s
    failed = verdict_module.empty("compile_error")
    failed.update(build_log="nvcc: error", error="nvcc: error")
    eid = verifier.record(store, kid, failed)
    build = store.latest_build(kid)
    assert (build["ok"], build["log"]) == (0, "nvcc: error")
    assert store.get("evaluations", eid)["build_id"] == build["id"]
    # A verdict that never built writes no build
    verifier.record(store, kid, verdict_module.empty("unverified"))
    assert store.db["builds"].count == 2 and store.db["evaluations"].count == 3


def test_failed_evaluation_leaves_no_build(store, silu):
    kid = store.add_kernel(store.upsert_problem(silu), KERNEL_SOURCE)
    bad = correct_verdict()
    bad["status"] = None  # evaluations.status is NOT NULL: the insert after the build fails
    with pytest.raises(sqlite3.IntegrityError):
        verifier.record(store, kid, bad)
    assert store.db["builds"].count == 0
    assert store.db["evaluations"].count == 0
    assert not store.db.conn.in_transaction
    # Other connections agree: nothing was committed
    assert in_thread(lambda: store.db["builds"].count) == 0
    # And the store still works afterwards
    verifier.record(store, kid, correct_verdict())
    assert store.db["builds"].count == 1 and store.db["evaluations"].count == 1


def test_failed_evaluation_in_other_thread_leaves_no_build(store, silu):
    kid = store.add_kernel(store.upsert_problem(silu), KERNEL_SOURCE)
    bad = correct_verdict()
    bad["status"] = None
    with pytest.raises(sqlite3.IntegrityError):
        in_thread(lambda: verifier.record(store, kid, bad))
    assert store.db["builds"].count == 0 and store.db["evaluations"].count == 0


def test_nested_transaction_rolls_back_with_the_outer_one(store, silu):
    pid = store.upsert_problem(silu)
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.add_kernel(pid, KERNEL_SOURCE)
            verifier.record(store, 1, correct_verdict())   # nested: a savepoint
            raise RuntimeError("boom")
    assert (store.db["kernels"].count, store.db["builds"].count,
            store.db["evaluations"].count) == (0, 0, 0)


# -- migrations -------------------------------------------------------------------------------

def _old_database(path: Path, stop_before: str) -> dict:
    """A database as an older version left it: migrations up to stop_before, plus rows."""
    db = sqlite_utils.Database(path)
    db.execute("PRAGMA foreign_keys=ON")
    migrations.apply(db, stop_before=stop_before)
    ids = {}
    ids["problem"] = db["problems"].insert({
        "name": "old", "path": "/old/old.py", "hash": "h" * 64, "source": "# old source",
        "family": "activation", "dtype": "float32", "flops": 10, "min_bytes": 20,
        "atol": 1e-4, "rtol": 1e-4, "created_at": "2024-01-01T00:00:00"}).last_pk
    ids["session"] = db["sessions"].insert({
        "problem_id": ids["problem"], "provider": "openai", "model": "m", "settings": "{}",
        "status": "done", "started_at": "2024-01-01T00:00:01"}).last_pk
    ids["round"] = db["rounds"].insert({"session_id": ids["session"], "n": 1,
                                        "status": "done"}).last_pk
    ids["idea"] = db["ideas"].insert({"round_id": ids["round"], "text": "tile it",
                                      "author": "llm", "status": "implemented"}).last_pk
    ids["kernel"] = db["kernels"].insert({
        "problem_id": ids["problem"], "session_id": ids["session"], "idea_id": ids["idea"],
        "source": KERNEL_SOURCE, "hash": "k" * 64, "origin": "llm"}).last_pk
    ids["build"] = db["builds"].insert({"kernel_id": ids["kernel"], "ok": 1, "seconds": 2.0,
                                        "cache_hit": 0, "log": "ok"}).last_pk
    ids["evaluation"] = db["evaluations"].insert({
        "kernel_id": ids["kernel"], "build_id": ids["build"], "status": "correct",
        "time_ms": 1.25, "verdict": json.dumps({"status": "correct"})}).last_pk
    ids["export"] = db["exports"].insert({"kernel_id": ids["kernel"], "path": "/x"}).last_pk
    assert [m.name for m in migrations.applied(db)] == \
        ALL_MIGRATIONS[:ALL_MIGRATIONS.index(stop_before)]
    db.close()
    return ids


def test_registered_migrations_are_the_expected_ones():
    assert [m.name for m in migrations._migrations] == ALL_MIGRATIONS


@pytest.mark.parametrize("stop_before", ALL_MIGRATIONS[1:])
def test_older_schema_upgrades_in_place(tmp_path, stop_before):
    path = tmp_path / "old.db"
    ids = _old_database(path, stop_before)
    store = Store(path)
    db = store.db

    # The data is intact
    assert store.get("problems", ids["problem"])["source"] == "# old source"
    assert store.get("sessions", ids["session"])["status"] == "done"
    assert store.get("rounds", ids["round"])["n"] == 1
    assert store.get("ideas", ids["idea"])["text"] == "tile it"
    k = store.get("kernels", ids["kernel"])
    assert (k["idea_id"], k["session_id"], k["source"], k["pruned"]) == (
        ids["idea"], ids["session"], KERNEL_SOURCE, 0)
    assert store.get("builds", ids["build"])["log"] == "ok"
    assert store.get("evaluations", ids["evaluation"])["time_ms"] == 1.25
    assert store.get("exports", ids["export"])["path"] == "/x"
    assert store.kernel_round(ids["kernel"]) == 1

    # The later tables and columns exist
    assert "llm_calls" in db.table_names()
    assert "extensions" in db["builds"].columns_dict
    assert "llm_call_id" in db["ideas"].columns_dict
    assert "llm_call_id" in db["kernels"].columns_dict
    assert "seeds" in db["rounds"].columns_dict
    assert {"idea_id", "kernel_id", "error_kind"} <= set(db["llm_calls"].columns_dict)
    assert "created_at" in db["sessions"].columns_dict
    assert "created_at" in db["rounds"].columns_dict
    fks = {(fk.table, fk.column, fk.other_table) for t in db.tables for fk in t.foreign_keys}
    assert {("ideas", "llm_call_id", "llm_calls"), ("kernels", "llm_call_id", "llm_calls"),
            ("kernels", "idea_id", "ideas"), ("llm_calls", "idea_id", "ideas"),
            ("llm_calls", "kernel_id", "kernels")} <= fks
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []

    # Every migration is recorded, each once
    names = [r["name"] for r in db["_sqlite_migrations"].rows_where(
        "migration_set = ?", ["kernel-workbench"], order_by="id")]
    assert names == ALL_MIGRATIONS

    # The upgraded database works with today's Store
    sid = store.create_session(ids["problem"], None, None, {"a": 1})
    rid = store.create_round(sid, 1)
    cid = store.add_llm_call(session_id=sid, round_id=rid, purpose="ideas")
    iid = store.add_idea(rid, "new", llm_call_id=cid)
    kid = store.add_kernel(ids["problem"], "new", session_id=sid, idea_id=iid, llm_call_id=cid)
    verifier.record(store, kid, correct_verdict())
    with pytest.raises(sqlite3.IntegrityError):
        store.add_kernel(999, "x")

    # Opening again applies nothing new
    before = list(db["_sqlite_migrations"].rows)
    schema = db.schema
    store.db.close()
    again = Store(path)
    assert list(again.db["_sqlite_migrations"].rows) == before
    assert again.db.schema == schema
    assert migrations.pending(again.db) == []


def test_fresh_store_records_every_migration_once(tmp_path):
    path = tmp_path / "new.db"
    Store(path)
    Store(path)
    db = sqlite_utils.Database(path)
    assert [m.name for m in migrations.applied(db)] == ALL_MIGRATIONS
    assert db["_sqlite_migrations"].count == len(ALL_MIGRATIONS)
    db.close()


def test_migrate_false_leaves_schema_alone(tmp_path):
    store = Store(tmp_path / "none.db", migrate=False)
    assert store.db.table_names() == []


# -- validation and configuration -------------------------------------------------------------

def test_invalid_idea_status_raises(store, silu):
    sid = store.create_session(store.upsert_problem(silu), None, None, {})
    rid = store.create_round(sid, 1)
    with pytest.raises(ValueError, match="idea status"):
        store.add_idea(rid, "x", status="maybe")
    iid = store.add_idea(rid, "x")
    for status in IDEA_STATUSES:
        store.set_idea_status(iid, status)
        assert store.get("ideas", iid)["status"] == status
    with pytest.raises(ValueError, match="idea status"):
        store.set_idea_status(iid, "rejected")
    assert store.get("ideas", iid)["status"] == IDEA_STATUSES[-1]
    assert store.db["ideas"].count == 1


def test_env_var_chooses_default_db_path(monkeypatch, tmp_path):
    monkeypatch.delenv(store_module.DB_ENV, raising=False)
    assert default_db_path() == Path("kernels.db")
    monkeypatch.setenv(store_module.DB_ENV, "")
    assert default_db_path() == Path("kernels.db")
    target = tmp_path / "elsewhere" / "wb.db"
    target.parent.mkdir()
    monkeypatch.setenv("KERNEL_WORKBENCH_DB", str(target))
    assert default_db_path() == target
    store = Store()
    assert store.path == target
    assert target.is_file()
    assert "problems" in store.db.table_names()
    # An explicit path wins over the environment
    explicit = tmp_path / "explicit.db"
    assert Store(explicit).path == explicit
