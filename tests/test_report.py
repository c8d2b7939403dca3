"""The session report: its numbers are the store's; fast_p and the geometric mean follow."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench.cli import main
from workbench.gpu import verdict as verdict_mod
from workbench.gpu import verifier
from workbench.problems import Problem
from workbench.report import FAST_P, ReportError, build_report, render_text
from workbench.store import Store


def problem(name: str) -> Problem:
    source = f"# {name}\n"
    return Problem(name=name, path=Path(f"{name}.py"), source=source,
                   hash=hashlib.sha256(source.encode()).hexdigest(), family="activation",
                   dtype="float32", atol=1e-4, rtol=1e-4, flops=None, min_bytes=1 << 20)


def verdict(status: str, speedup: float | None) -> dict:
    v = verdict_mod.empty(status)
    if speedup is not None:
        v.update(time_ms=1.0 / speedup, ci95_ms=[0.9 / speedup, 1.1 / speedup], ref_eager_ms=1.0,
                 ref_compile_ms=0.8, speedup_eager=speedup, speedup_compile=0.8 * speedup)
    return v


# (session, problem, round, status, speedup over eager, cleared)
KERNELS = [
    ("s1", "A", 1, "correct", 1.2, False),
    ("s1", "A", 1, "incorrect", 9.0, False),     # fast but wrong: never counts
    ("s1", "A", 2, "flagged", 20.0, False),      # flagged and not cleared: never counts
    ("s1", "A", 2, "correct", 1.8, False),
    ("s1", "A", 3, "correct", 1.5, False),
    ("s2", "B", 1, "flagged", 3.0, True),        # cleared by a person: counts
    ("s2", "B", 1, "correct", 0.7, False),
    ("s3", "C", 1, "compile_error", None, False),
    ("s4", "A", 1, "correct", 1.9, False),       # a second session on A beats s1
]


@pytest.fixture
def world(tmp_path):
    store = Store(tmp_path / "kernels.db")
    problems = {n: store.upsert_problem(problem(n)) for n in "ABC"}
    sessions, rounds, kernels = {}, {}, []
    for s, p, n, status, speedup, cleared in KERNELS:
        if s not in sessions:
            sessions[s] = store.create_session(problems[p], "openai", "gpt-test", {},
                                               env={"gpu": "NVIDIA H200"})
        if (s, n) not in rounds:
            rounds[s, n] = store.create_round(sessions[s], n)
        idea = store.add_idea(rounds[s, n], f"idea {s}/{n}", status="implemented")
        kid = store.add_kernel(problems[p], f"# kernel {len(kernels)}", session_id=sessions[s],
                               idea_id=idea)
        verifier.record(store, kid, verdict(status, speedup))
        if cleared:
            store.set_kernel_flags(kid, cleared=True)
        kernels.append(kid)
    return {"store": store, "sessions": sessions, "kernels": kernels, "problems": problems,
            "path": tmp_path / "kernels.db"}


def test_best_kernel_per_session_and_rounds(world):
    report = build_report(world["store"], [])
    by_id = {s["session_id"]: s for s in report["sessions"]}
    s1 = by_id[world["sessions"]["s1"]]
    assert s1["best"]["kernel_id"] == world["kernels"][3]
    assert s1["best"]["round"] == 2
    stored = world["store"].latest_evaluation(world["kernels"][3])
    for key in ("speedup_eager", "speedup_compile", "time_ms", "ref_eager_ms", "ref_compile_ms"):
        assert s1["best"][key] == stored[key]
    assert s1["best"]["ci95_ms"] == [stored["ci95_lo_ms"], stored["ci95_hi_ms"]]
    assert [(r["round"], r["kernels"], r["correct"], r["best_speedup_eager"],
             r["best_so_far_speedup_eager"]) for r in s1["rounds"]] == [
        (1, 2, 1, 1.2, 1.2), (2, 2, 1, 1.8, 1.8), (3, 1, 1, 1.5, 1.8)]
    assert by_id[world["sessions"]["s2"]]["best"]["kernel_id"] == world["kernels"][5]
    assert by_id[world["sessions"]["s3"]]["best"] is None


def test_fast_p_and_geomean_follow_from_the_store(world):
    report = build_report(world["store"], [])
    # Recompute from the evaluations table: best counted-correct speedup per problem.
    store, best = world["store"], {}
    for (_, p, *_rest), kid in zip(KERNELS, world["kernels"]):
        best.setdefault(p, None)
        ev, kernel = store.latest_evaluation(kid), store.get("kernels", kid)
        if ev["status"] == "correct" or (ev["status"] == "flagged" and kernel["cleared"]):
            best[p] = max(best[p] or 0.0, ev["speedup_eager"])
    assert {p["problem"]: p["best"] and p["best"]["speedup_eager"]
            for p in report["problems"]} == best == {"A": 1.9, "B": 3.0, "C": None}
    total = len(best)
    expected = {f"{p:g}": sum(1 for s in best.values() if s is not None and (p == 0 or s > p))
                / total for p in FAST_P}
    assert report["fast_p"] == expected
    assert report["fast_p"]["0"] == pytest.approx(2 / 3)
    assert report["fast_p"]["2"] == pytest.approx(1 / 3)
    assert report["geomean_speedup_eager"] == pytest.approx(math.sqrt(1.9 * 3.0))
    assert (report["geomean_over_problems"], report["problems_total"]) == (2, 3)


def test_selection_by_session_and_problem(world):
    s1, s4 = world["sessions"]["s1"], world["sessions"]["s4"]
    only = build_report(world["store"], [str(s1)])
    assert [s["session_id"] for s in only["sessions"]] == [s1]
    assert only["fast_p"]["2"] == 0.0 and only["geomean_speedup_eager"] == pytest.approx(1.8)
    by_problem = build_report(world["store"], ["A"])
    assert [s["session_id"] for s in by_problem["sessions"]] == [s1, s4]
    with pytest.raises(ReportError, match="session 99: no such session"):
        build_report(world["store"], ["99"])
    with pytest.raises(ReportError, match="nope: neither a session id nor a problem"):
        build_report(world["store"], ["nope"])


def test_text_report(world):
    text = render_text(build_report(world["store"], [str(world["sessions"]["s1"])]))
    assert "best: kernel" in text and "1.800x vs eager" in text
    lines = [line for line in text.splitlines() if "correct)" in line]
    # Bars grow with the best speedup so far: round 2 and 3 equal, longer than round 1.
    widths = [line.count("█") for line in lines]
    assert len(widths) == 3 and widths[0] < widths[1] == widths[2]
    assert "fast_0" in text and "fast_2" in text
    assert "over the 1 of 1 problem(s)" in text
    assert f"kernel {world['kernels'][3]} (session {world['sessions']['s1']}): 1.800x" in text
    # The baseline the speedups are against is declared (the session setting, default PyTorch's).
    assert "timed under PyTorch defaults (cuDNN convolutions in TF32" in text
    assert "correctness in strict fp32" in text


def test_cli_report_json_and_text(world):
    runner = CliRunner()
    db = str(world["path"])
    as_json = runner.invoke(main, ["report", "--json", "--db", db])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output) == json.loads(json.dumps(build_report(world["store"], [])))
    text = runner.invoke(main, ["report", "B", "--db", db])
    assert text.exit_code == 0 and "fast_p over 1 problem(s)" in text.output
    bad = runner.invoke(main, ["report", "nope", "--db", db])
    assert bad.exit_code == 2 and bad.output.count("\n") == 1


def test_empty_store(tmp_path):
    store = Store(tmp_path / "kernels.db")
    report = build_report(store, [])
    assert report["problems_total"] == 0 and report["geomean_speedup_eager"] is None
    assert render_text(report) == "no sessions selected\n"
