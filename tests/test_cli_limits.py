"""The compile time limit is the user's to set: `run --compile-timeout`, also on --resume."""
from __future__ import annotations

from click.testing import CliRunner

from test_search_cli import setup  # noqa: F401 - the fixture: fake LLM server, fake verifier
from workbench.cli import main
from workbench.store import Store


def test_run_sets_and_resume_changes_the_compile_limit(setup):  # noqa: F811
    problem, base, db, _ = setup
    args = ["--rounds", "1", "--ideas", "1", "--impls", "1", "--db", str(db)]
    result = CliRunner().invoke(main, ["run", problem, *base, *args, "--compile-timeout", "900"])
    assert result.exit_code == 0, result.output
    assert Store(db).settings(1)["eval"]["compile_timeout_s"] == 900
    result = CliRunner().invoke(main, ["run", "--resume", "1", "--compile-timeout", "60",
                                       "--db", str(db)])
    assert Store(db).settings(1)["eval"]["compile_timeout_s"] == 60, result.output
    bad = CliRunner().invoke(main, ["run", problem, *base, *args, "--compile-timeout", "0"])
    assert bad.exit_code == 2 and "--compile-timeout" in bad.output


def test_numbers_out_of_range_are_refused_before_anything_starts(setup):  # noqa: F811
    problem, base, db, server = setup
    for flag, value in (("--rounds", "-3"), ("--ideas", "0"), ("--impls", "0"),
                        ("--top-k", "0"), ("--repairs", "-1"), ("--budget-usd", "-1"),
                        ("--atol", "-1e-3"), ("--timeout", "0"), ("--concurrency", "0")):
        result = CliRunner().invoke(main, ["run", problem, *base, flag, value, "--db", str(db)])
        assert result.exit_code == 2 and flag in result.output, (flag, result.output)
    assert not db.exists() and not server.requests
