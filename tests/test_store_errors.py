"""A database that cannot be used as asked is one line, from every command: a damaged file,
a read-only one, a full disk, a missing directory, an id past SQLite's range, a schema from a
newer version; and two processes opening a fresh file at once both succeed."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3

import pytest
import sqlite_utils
from click.testing import CliRunner

import workbench.store as store_module
import workbench.store_errors as store_errors
from test_search_cli import setup  # noqa: F401 - the fixture: fake LLM server, fake verifier
from workbench.cli import main
from workbench.store import Store, StoreError


def one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: ")
    for word in words:
        assert word in result.output, result.output


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def corrupt(tmp_path):
    path = tmp_path / "kernels.db"
    path.write_bytes(b"this is not an SQLite file\n" * 100)
    return str(path)


def test_damaged_file_is_one_line_everywhere(corrupt, tmp_path):
    one_line_error(invoke("report", "--db", corrupt), "damaged", "move it aside")
    one_line_error(invoke("export", "k1", "--out", str(tmp_path / "o"), "--db", corrupt),
                   "damaged")
    one_line_error(invoke("--db", corrupt), "damaged")
    one_line_error(invoke("run", "--resume", "1", "--db", corrupt), "damaged")
    with pytest.raises(StoreError, match="not a kernel-workbench database"):
        Store(corrupt)


def test_missing_directory_is_one_line_for_run_and_eval(setup, tmp_path):  # noqa: F811
    problem, base, _, _ = setup
    candidate = tmp_path / "c.py"
    candidate.write_text("x = 1\n")
    missing = str(tmp_path / "no" / "such" / "dir" / "k.db")
    one_line_error(invoke("run", problem, *base, "--db", missing), "does not exist")
    one_line_error(invoke("eval", problem, str(candidate), "--no-gpu", "--db", missing),
                   "does not exist")
    assert not (tmp_path / "no").exists()


def test_typo_in_the_problem_leaves_no_database(setup, tmp_path):  # noqa: F811
    _, base, _, _ = setup
    db = tmp_path / "fresh.db"
    one_line_error(invoke("run", "softmx", *base, "--db", str(db)), "did you mean softmax")
    one_line_error(invoke("softmx", "--db", str(db)), "did you mean softmax")
    one_line_error(invoke("--db", str(db), "softmx"), "did you mean softmax")
    assert not db.exists()


def test_read_only_file_reports_and_refuses_writes_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "k.db"
    store = Store(path)
    pid = store.db["problems"].insert({"name": "relu", "hash": "h", "source": "s"}).last_pk
    sid = store.create_session(pid, "openai", "m", {})
    store.db.close()
    # Root may write any file, so say it as the OS would for a file without write permission.
    monkeypatch.setattr(store_errors.os, "access",
                        lambda p, mode: mode != os.W_OK and os.path.exists(p))
    report = invoke("report", "--db", str(path))
    assert report.exit_code == 0 and f"session {sid}" in report.output, report.output
    readonly = Store(path)
    assert readonly.read_only and readonly.find("sessions", sid)["model"] == "m"
    with pytest.raises(StoreError, match="read-only.*chmod u\\+w"):
        readonly.create_session(pid, "openai", "m", {})
    one_line_error(invoke("run", "--resume", str(sid), "--provider", "openai-compatible",
                          "--base-url", "http://127.0.0.1:9", "--model", "m", "--db", str(path)),
                   "read-only")


def test_full_disk_is_one_line(tmp_path, monkeypatch, setup):  # noqa: F811
    problem, _, _, _ = setup
    db = tmp_path / "k.db"
    Store(db)
    connect = store_module._connect

    def tiny_disk(path, read_only=False):
        conn = connect(path, read_only)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")
        return conn

    monkeypatch.setattr(store_module, "_connect", tiny_disk)
    candidate = tmp_path / "big.py"
    candidate.write_text("# padding\n" * 100_000)
    one_line_error(invoke("eval", problem, str(candidate), "--no-gpu", "--db", str(db)),
                   "disk is full", "not saved")


def test_ids_past_sqlites_range_are_one_line(tmp_path):
    db = tmp_path / "k.db"
    Store(db)
    huge = str(2**64)
    one_line_error(invoke("report", huge, "--db", str(db)), "no such session")
    # Click's usage errors: the usage line, then one line naming the argument.
    for args, words in ((("export", huge, "--out", str(tmp_path / "o")), "not a kernel id"),
                        (("run", "--resume", huge), "--resume")):
        result = invoke(*args, "--db", str(db))
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert words in result.output.splitlines()[-1], result.output
    assert Store(db).find("kernels", 2**64) is None


def test_newer_schema_is_refused(tmp_path):
    db = tmp_path / "k.db"
    Store(db).db.close()
    raw = sqlite_utils.Database(db)
    raw["_sqlite_migrations"].insert({"migration_set": "kernel-workbench",
                                      "name": "m999_from_the_future", "applied_at": "later"})
    raw.close()
    with pytest.raises(StoreError, match="newer kernel-workbench.*m999_from_the_future"):
        Store(db)
    one_line_error(invoke("report", "--db", str(db)), "newer kernel-workbench", "upgrade")


def _open(path: str, results) -> None:
    try:
        Store(path)
        results.put("ok")
    except Exception as e:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(e).__name__}: {e}")


def test_two_processes_open_a_fresh_database_at_once(tmp_path):
    context = multiprocessing.get_context("fork")
    for attempt in range(5):
        path = str(tmp_path / f"fresh{attempt}.db")
        results = context.Queue()
        procs = [context.Process(target=_open, args=(path, results)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [results.get(timeout=5) for _ in procs] == ["ok", "ok"]
    names = [r[0] for r in sqlite3.connect(path).execute(
        "select name from _sqlite_migrations")]
    assert len(names) == len(set(names)) == len(store_module.migrations._migrations)


def test_a_directory_given_as_the_database_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_WORKBENCH_DB", str(tmp_path))   # --db itself is checked by click
    one_line_error(invoke(), "is a directory")            # the app
    one_line_error(invoke("report"), "no workbench database there")
