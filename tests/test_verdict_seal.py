"""Verdicts only from the verifier: a row written into `evaluations` any other way (a candidate's
orphan with sqlite3, a changed figure, a copied seal) reads as untrusted in the store, the app's
queries, `report` and `export`, and never seeds the search."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat

import pytest
from click.testing import CliRunner

from test_search_engine import PROBLEM
from workbench import verdict_seal
from workbench.cli import main
from workbench.gpu.verdict import empty
from workbench.problems import Problem
from workbench.search import best_kernel
from workbench.store import Store
from workbench.tui import glyphs, queries

KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n# {}\n"


def _verdict(speedup: float) -> dict:
    v = empty("correct")
    v.update(verified=True, time_ms=1.0 / speedup, ref_eager_ms=1.0, speedup_eager=speedup,
             ci95_ms=[0.99 / speedup, 1.01 / speedup], trials=6, atol=1e-4, rtol=1e-4,
             max_abs_err=1e-6, max_rel_err=1e-6, floor_ms=0.01, samples={"candidate": [0.5]})
    return v


def _forge(db_path, kernel_id: int, speedup: float = 42.0) -> None:
    """What the issue's payload did: a plain sqlite3 insert of a glowing verdict."""
    conn = sqlite3.connect(db_path)
    conn.execute(
        "insert into evaluations (kernel_id, status, time_ms, speedup_eager, ref_eager_ms, "
        "trials, flags, verdict, created_at) values (?, 'correct', ?, ?, 1.0, 1, '[]', ?, "
        "'2026-12-01T00:00:00')",
        [kernel_id, 1.0 / speedup, speedup,
         json.dumps({"status": "correct", "verified": True, "speedup_eager": speedup})])
    conn.commit()
    conn.close()


@pytest.fixture
def db(tmp_path):
    store = Store(tmp_path / "k.db")
    problem = Problem(name="relu", path=tmp_path / "relu.py", source=PROBLEM,
                      hash=hashlib.sha256(PROBLEM.encode()).hexdigest(), family="activation",
                      dtype="float32", atol=1e-4, rtol=1e-4, flops=1 << 20, min_bytes=8 << 20)
    pid = store.upsert_problem(problem)
    sid = store.create_session(pid, "openai", "o3", {"eval": {"no_gpu": False}})
    honest = store.add_kernel(pid, KERNEL.format("honest"), session_id=sid)
    store.add_evaluation(honest, _verdict(1.5), build_id=store.add_build(
        honest, ok=True, seconds=1.0, cache_hit=False, cache_key="a", log=""))
    # The payload's kernel compiled (a real build row), then its orphan forged the verdict.
    forged = store.add_kernel(pid, KERNEL.format("forged"), session_id=sid)
    store.add_build(forged, ok=True, seconds=1.0, cache_hit=False, cache_key="b", log="")
    _forge(store.path, forged)
    return store, sid, honest, forged


def test_store_tells_sealed_from_forged(db):
    store, sid, honest, forged = db
    assert store.latest_evaluation(honest)["trusted"] is True
    assert store.latest_evaluation(forged)["trusted"] is False
    rows = {r["id"]: r for r in store.session_kernels(sid)}
    assert rows[honest]["trusted"] == 1 and rows[forged]["trusted"] == 0
    assert best_kernel(store, sid)["id"] == honest        # the 42x forgery never seeds

    # A sealed row changed afterwards, or given another row's seal, is no longer trusted.
    conn = sqlite3.connect(store.path)
    conn.execute("update evaluations set speedup_eager = 40.0 where kernel_id = ?", [honest])
    conn.commit()
    assert store.latest_evaluation(honest)["trusted"] is False
    conn.execute("update evaluations set speedup_eager = 1.5 where kernel_id = ?", [honest])
    conn.commit()
    assert store.latest_evaluation(honest)["trusted"] is True
    seal = store.latest_evaluation(honest)["signature"]
    conn.execute("update evaluations set signature = ? where kernel_id = ?", [seal, forged])
    conn.commit()
    conn.close()
    assert store.latest_evaluation(forged)["trusted"] is False


def test_which_verdict_a_copy_repeats_is_sealed_and_old_seals_still_hold(db):
    store, _, honest, _ = db
    row = store.latest_evaluation(honest)
    assert row["signature"].startswith("v3:")
    conn = sqlite3.connect(store.path)
    conn.execute("update evaluations set reused_from = ? where id = ?", [row["id"], row["id"]])
    conn.commit()
    assert store.latest_evaluation(honest)["trusted"] is False     # reused_from is covered
    conn.execute("update evaluations set reused_from = null where id = ?", [row["id"]])
    # A row sealed before v2 (its seal never saw reused_from) still reads as trusted.
    old = verdict_seal._mac([row.get(c) for c in verdict_seal.SEALED_V1], "v1")
    conn.execute("update evaluations set signature = ? where id = ?", [old, row["id"]])
    conn.commit()
    conn.close()
    assert store.latest_evaluation(honest)["trusted"] is True
    assert queries.kernel(store, honest)["status"] == "correct"     # the SQL check agrees


def test_the_app_shows_a_forged_verdict_as_untrusted(db):
    store, _, honest, forged = db
    row = queries.kernel(store, forged)
    assert row["status"] == "untrusted"
    assert glyphs.kernel_state(row, set(), None) == "untrusted"
    assert "untrusted verdict" in glyphs.kernel_label(row, set(), None).plain
    assert queries.kernel(store, honest)["status"] == "correct"


def test_report_and_export_refuse_a_forged_verdict(db, tmp_path):
    store, sid, honest, forged = db
    runner = CliRunner()
    result = runner.invoke(main, ["report", "--db", str(store.path)])
    assert result.exit_code == 0, result.output
    assert f"UNTRUSTED verdicts, not counted: kernel {forged} (its seal does not match" in \
        result.output
    assert "42.000x" not in result.output and "1 correct" in result.output
    data = json.loads(runner.invoke(main, ["report", "--json", "--db", str(store.path)]).output)
    assert data["sessions"][0]["untrusted"] == [forged]
    assert data["sessions"][0]["best"]["kernel_id"] == honest

    out = tmp_path / "out"
    result = runner.invoke(main, ["export", str(forged), "--out", str(out), "--db",
                                  str(store.path)])
    assert result.exit_code == 2
    assert f"kernel {forged}'s latest verdict (correct) is untrusted" in result.output
    assert not out.exists()
    result = runner.invoke(main, ["export", str(forged), "--out", str(out), "--db",
                                  str(store.path), "--allow-unverified"])
    report = json.loads((out / "report.json").read_text())
    assert report["evaluation"]["trusted"] is False
    assert report["evaluation"]["correct_for_reporting"] is False
    assert "UNTRUSTED" in (out / "report.md").read_text()


def test_the_key_is_private_and_made_once(tmp_path, monkeypatch):
    path = tmp_path / "data" / "kernel-workbench" / "verdict.key"
    monkeypatch.setenv(verdict_seal.KEY_ENV, str(path))
    first = verdict_seal.seal({"kernel_id": 1, "status": "correct"}, {"source": "x", "cleared": 0})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    verdict_seal._keys.clear()
    assert verdict_seal.seal({"kernel_id": 1, "status": "correct"},
                             {"source": "x", "cleared": 0}) == first
    # Another install's key (or none readable) cannot vouch for this one's rows.
    monkeypatch.setenv(verdict_seal.KEY_ENV, str(tmp_path / "other.key"))
    assert not verdict_seal.row_intact({"kernel_id": 1, "status": "correct", "signature": first},
                                       {"source": "x", "cleared": 0})


def test_a_verdict_cannot_be_moved_onto_other_code(db, tmp_path):
    # The seal covers the evaluated kernel's source: what export writes and the app shows.
    store, sid, honest, _ = db
    conn = sqlite3.connect(store.path)
    conn.execute("update kernels set source = ? where id = ?", [KERNEL.format("swapped"), honest])
    conn.commit()
    conn.close()
    assert store.latest_evaluation(honest)["trusted"] is False
    assert queries.kernel(store, honest)["status"] == "untrusted"
    assert best_kernel(store, sid) is None
    result = CliRunner().invoke(main, ["export", str(honest), "--out", str(tmp_path / "o"),
                                       "--db", str(store.path)])
    assert result.exit_code == 2 and "untrusted" in result.output


def test_a_clearance_counts_only_when_the_store_made_it(db):
    store, sid, _, _ = db
    pid = store.get("sessions", sid)["problem_id"]
    kid = store.add_kernel(pid, KERNEL.format("flagged"), session_id=sid)
    v = _verdict(3.0)
    v.update(status="flagged", flags=[{"kind": "caching", "reason": "looks like a cache"}])
    store.add_evaluation(kid, v)
    assert best_kernel(store, sid)["id"] != kid          # flagged, not cleared: not a seed
    conn = sqlite3.connect(store.path)
    conn.execute("update kernels set cleared = 1 where id = ?", [kid])   # written from outside
    conn.commit()
    assert store.latest_evaluation(kid)["trusted"] is False
    assert best_kernel(store, sid)["id"] != kid
    conn.execute("update kernels set cleared = 0 where id = ?", [kid])
    conn.commit()
    conn.close()
    store.set_kernel_flags(kid, cleared=True)              # a person clears it (control.py)
    assert store.latest_evaluation(kid)["trusted"] is True
    assert best_kernel(store, sid)["id"] == kid           # 3x, flagged and cleared by a person


def test_a_v2_seal_still_holds_without_covering_the_kernel(db):
    store, _, honest, _ = db
    row = store.latest_evaluation(honest)
    v2 = verdict_seal._mac([row.get(c) for c in verdict_seal.SEALED], "v2")
    conn = sqlite3.connect(store.path)
    conn.execute("update evaluations set signature = ? where id = ?", [v2, row["id"]])
    conn.commit()
    conn.close()
    assert store.latest_evaluation(honest)["trusted"] is True
    assert queries.kernel(store, honest)["status"] == "correct"


def test_the_bank_and_the_model_table_count_only_sealed_verdicts(db):
    # The bank seeds sessions and gives prompts their examples; the model table ranks models.
    from workbench import bank
    from workbench.model_report import model_table

    store, sid, honest, forged = db
    assert [e["kernel"] for e in bank.entries(store)] == [honest]
    call = store.insert("llm_calls", {"session_id": sid, "provider": "openai", "model": "o3",
                                      "purpose": "implement", "prompt": "p", "response": "r"})
    for kid in (honest, forged):
        store.update("kernels", kid, llm_call_id=call)
    (row,) = model_table(store, [sid])
    assert row["kernels"] == 2 and row["correct"] == 1 and row["best_speedup_eager"] == 1.5


def test_the_ideas_already_tried_never_quote_a_forged_verdict(db):
    from workbench.search import queries as search_queries

    store, sid, honest, forged = db
    rnd = store.insert("rounds", {"session_id": sid, "n": 0, "status": "open", "seeds": "[null]"})
    for kid, text in ((honest, "Vectorise."), (forged, "Cache the output.")):
        idea = store.insert("ideas", {"round_id": rnd, "kind": "memory", "text": text,
                                      "author": "model", "status": "implemented"})
        store.update("kernels", kid, idea_id=idea)
    outcomes = {r["text"]: r["outcome"] for r in search_queries.idea_outcomes(store, sid)}
    assert outcomes == {"Vectorise.": "correct|1.5", "Cache the output.": "untrusted|"}
    # Nor the reference's eager time the prompts quote: the forged row is newer (1.0 there too).
    conn = sqlite3.connect(store.path)
    conn.execute("update evaluations set ref_eager_ms = 99.0 where kernel_id = ?", [forged])
    conn.commit()
    conn.close()
    pid = store.get("sessions", sid)["problem_id"]
    assert search_queries.reference_eager_ms(store, pid) == 1.0
