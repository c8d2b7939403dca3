"""One definition of the best kernel (Store.best_kernel) for `run`, `report` and the app: an
unverified kernel (built without a GPU) or a pruned one is never "best"."""
from __future__ import annotations

from click.testing import CliRunner

from test_search_cli import setup  # noqa: F401 - the fixture: fake LLM server, fake verifier
from workbench import control
from workbench.cli import main
from workbench.store import Store


def test_no_gpu_run_and_report_agree_there_is_no_best(setup):  # noqa: F811
    problem, base, db, _ = setup
    result = CliRunner().invoke(main, ["run", problem, *base, "--rounds", "1", "--ideas", "1",
                                       "--impls", "1", "--no-gpu", "--db", str(db)])
    assert "unverified" in result.output, result.output
    assert "best kernel: none verified correct" in result.output
    report = CliRunner().invoke(main, ["report", "--db", str(db)])
    assert "best: no correct kernel" in report.output, report.output
    assert Store(db).best_kernel(1) is None


def test_run_and_report_name_the_same_best_and_never_a_pruned_one(setup):  # noqa: F811
    problem, base, db, _ = setup
    result = CliRunner().invoke(main, ["run", problem, *base, "--rounds", "2", "--ideas", "2",
                                       "--impls", "1", "--top-k", "1", "--db", str(db)])
    assert result.exit_code == 0, result.output
    store = Store(db)
    best = store.best_kernel(1)
    assert f"best kernel: {best['id']} " in result.output
    report = CliRunner().invoke(main, ["report", "1", "--db", str(db)])
    assert f"best: kernel {best['id']} " in report.output, report.output
    control.prune_kernel(store, best["id"], pruned=True)
    after = store.best_kernel(1)
    assert after is None or after["id"] != best["id"]
    report = CliRunner().invoke(main, ["report", "1", "--db", str(db)])
    assert f"best: kernel {best['id']} " not in report.output
