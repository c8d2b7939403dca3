"""`kernel-workbench run` end to end: real OpenAI client → local fake server, fake verifier."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import workbench.headless as headless
from llm_server import FakeExecutor, FakeLLMServer
from test_search_engine import PROBLEM, Script
from workbench.cli import main

SECRET = "secret-key-for-tests-0123"


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setattr(headless, "make_executor", lambda gpus, on_phase: FakeExecutor())
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", SECRET)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for var in ("KERNEL_WORKBENCH_DB", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    problem = tmp_path / "relu.py"
    problem.write_text(PROBLEM)
    with FakeLLMServer(responder=Script()) as server:
        base = ["--provider", "openai-compatible", "--model", "local", "--base-url",
                server.openai_url, "--retries", "0", "--timeout", "5"]
        yield str(problem), base, tmp_path / "k.db", server


def invoke(args, **kw):
    return CliRunner().invoke(main, args, catch_exceptions=False, **kw)


def test_run_prints_progress_table_and_best(setup):
    problem, base, db, server = setup
    result = invoke(["run", problem, *base, "--rounds", "2", "--ideas", "2", "--impls", "1",
                     "--top-k", "1", "--db", str(db)])
    out = result.output
    assert result.exit_code == 0, out
    assert "== round 0 ==" in out and "== round 1 ==" in out
    assert "llm implement #" in out and "in / " in out and "correct 1.50x vs eager" in out
    assert "round  idea kernel" in out and "best kernel: " in out
    assert "session 1 finished" in out
    assert db.is_file() and SECRET.encode() not in db.read_bytes()
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)


def test_review_at_the_terminal(setup):
    problem, base, db, _ = setup
    result = invoke(["run", problem, *base, "--rounds", "1", "--ideas", "3", "--impls", "1",
                     "--review", "--db", str(db)],
                    input="a\nv\ne\nUnroll by eight instead.\n")
    assert result.exit_code == 0, result.output
    from workbench.store import Store
    ideas = Store(db).rows("ideas")
    assert [i["status"] for i in ideas] == ["implemented", "vetoed", "implemented"]
    assert ideas[2]["text"] == "Unroll by eight instead."


def test_budget_stop_then_resume(setup, monkeypatch):
    problem, base, db, _ = setup
    monkeypatch.setenv("KERNEL_WORKBENCH_DB", str(db))
    result = invoke(["run", problem, *base, "--rounds", "1", "--ideas", "2", "--impls", "2",
                     "--budget-tokens", "150", "--concurrency", "1"])
    assert result.exit_code == 1
    assert "stopped: budget reached: 150 of 150 tokens used" in result.output
    assert "resume with: kernel-workbench run --resume 1" in result.output
    result = invoke(["run", "--resume", "1", "--budget-tokens", "100000"])
    assert result.exit_code == 0, result.output
    assert "session 1 finished" in result.output
    result = invoke(["run", "--resume", "7"])
    assert result.exit_code == 2 and "no session 7" in result.output


def test_bad_input_is_one_line(setup):
    problem, base, db, _ = setup
    for args, text in ((["run", "no_such_problem", *base], "no problem of that name"),
                       (["run", problem, "--provider", "gemini", "--model", "g"], "GEMINI_API_KEY"),
                       (["run", problem, *base, "--prompts", "/nonexistent"], "no such prompt"),
                       (["run"], "--resume")):
        result = invoke([*args, "--db", str(db)])
        assert result.exit_code == 2 and text in result.output
        assert "Traceback" not in result.output


def test_provider_from_the_config_file(setup, tmp_path):
    problem, base, db, server = setup
    config = tmp_path / "config" / "kernel-workbench"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'[llm]\nprovider = "openai-compatible"\nmodel = "from-config"\n'
        f'base_url = "{server.openai_url}"\nretries = 0\n')
    result = invoke(["run", problem, "--rounds", "1", "--ideas", "1", "--impls", "1",
                     "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert {r.body["model"] for r in server.requests} == {"from-config"}


def test_verify_workers_is_a_session_setting(setup, monkeypatch):
    problem, base, db, _ = setup
    executors = []

    def make(gpus, on_phase):
        executors.append(FakeExecutor())
        return executors[-1]

    monkeypatch.setattr(headless, "make_executor", make)
    result = invoke(["run", problem, *base, "--rounds", "1", "--ideas", "1", "--impls", "1",
                     "--verify-workers", "3", "--db", str(db)])
    assert result.exit_code == 0, result.output
    from workbench.store import Store
    assert Store(db).settings(1)["eval"]["verify_workers"] == 3
    # The verifier reads the width from each request (the app shares one pool).
    assert {r.settings.verify_workers for r in executors[0].requests} == {3}
    bad = invoke(["run", problem, *base, "--verify-workers", "0", "--db", str(db)])
    assert bad.exit_code == 2 and "--verify-workers" in bad.output
