"""Same source, same verdict: a kernel whose normalised source was evaluated before under the same
problem and settings reuses that verdict (the store says which), unless a re-time is asked for."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import workbench.cli as cli
from workbench import cuda_env
from workbench.gpu.executor import EvalSettings
from workbench.gpu.simulated import TOY_PROBLEM as PROBLEM
from workbench.gpu import verifier
from workbench.gpu.verdict import empty
from workbench.gpu.verifier import record, request_for, reused_verdict
from workbench.kernel_report import kernel_report, render_markdown
from workbench.problems import load_problem
from workbench.store import Store
from workbench.tui import queries as tui_queries
from workbench.tui.bench_table import flags_text as bench_flags

CANDIDATE = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
            "        return x + x\n"
# The same kernel, commented and laid out differently.
RESTYLED = "# doubled\nimport torch\n\n\nclass ModelNew(torch.nn.Module):  # mine\n" \
           "    def forward(self, x):\n        return x+x  # add\n"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_WORKBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "twice.py").write_text(PROBLEM)
    (tmp_path / "a.py").write_text(CANDIDATE)
    (tmp_path / "b.py").write_text(RESTYLED)
    return tmp_path


def evaluate(env, name: str, *extra: str) -> dict:
    result = CliRunner().invoke(cli.main, ["eval", str(env / "twice.py"), str(env / name),
                                           "--no-gpu", "--json", "--db", str(env / "k.db"),
                                           *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_same_source_reuses_the_verdict_unless_retimed(env, monkeypatch):
    first = evaluate(env, "a.py")
    assert first["status"] in ("unverified", "flagged") and not first.get("reused_from")
    store = Store(env / "k.db")
    (original,) = store.rows("evaluations")

    def no_worker(*args, **kwargs):
        raise AssertionError("a reused verdict needs no worker")

    monkeypatch.setattr(cli, "_verify", no_worker)
    again = evaluate(env, "b.py")
    assert again["reused_from"] == original["id"] and again["status"] == first["status"]
    copy = store.latest_evaluation(again["kernel_id"])
    assert copy["reused_from"] == original["id"] and copy["trusted"]
    assert copy["kernel_id"] != original["kernel_id"]

    monkeypatch.undo()
    monkeypatch.setenv("KERNEL_WORKBENCH_CACHE", str(env / "cache"))
    retimed = evaluate(env, "b.py", "--retime")
    assert not retimed.get("reused_from")
    assert store.latest_evaluation(retimed["kernel_id"])["reused_from"] is None
    other = evaluate(env, "b.py", "--trials", "7")   # other settings: another verdict
    assert not other.get("reused_from")


def test_only_sealed_lasting_verdicts_are_reused(env, monkeypatch):
    store = Store(env / "k.db")
    problem = load_problem(env / "twice.py", smoke=False)
    request = request_for(problem, CANDIDATE, EvalSettings(no_gpu=True))
    kernel = store.add_kernel(store.upsert_problem(problem), CANDIDATE, origin="file")
    key = request.reuse_key()
    # A timeout says more about the moment than the kernel; a row without a seal was not
    # written by the verifier.
    store.add_evaluation(kernel, {"status": "timeout", "reuse_key": key})
    store.insert("evaluations", {"kernel_id": kernel, "status": "correct", "reuse_key": key,
                                 "verdict": {"status": "correct"}})
    assert reused_verdict(store, request) is None
    evaluation = store.add_evaluation(kernel, {"status": "compile_error", "reuse_key": key})
    assert reused_verdict(store, request)["reused_from"] == evaluation
    # A GPU verdict is reused only on a machine with that GPU model.
    timed = store.add_evaluation(kernel, {"status": "correct", "reuse_key": key,
                                          "gpu": "NVIDIA H200"})
    monkeypatch.setattr(verifier, "_gpu_models", lambda: frozenset())
    assert reused_verdict(store, request) is None
    monkeypatch.setattr(verifier, "_gpu_models", lambda: frozenset({"NVIDIA H200"}))
    assert reused_verdict(store, request)["reused_from"] == timed
    # Timed against eager only, the reference's torch.compile having failed in the worker: the
    # next eval times it again.
    store.add_evaluation(kernel, {"status": "correct", "reuse_key": key, "gpu": "NVIDIA H200",
                                  "time_ms": 0.1, "compile_reference_error": "PermissionError"})
    assert reused_verdict(store, request) is None
    assert "(not timed: the reference's compile failed: PermissionError)" in \
        render_markdown(kernel_report(store, kernel))
    assert "no-compile-baseline" in bench_flags(tui_queries.kernel(store, kernel))
    # Comments and layout aside the same; a changed tolerance is not.
    assert request_for(problem, RESTYLED, EvalSettings(no_gpu=True)).reuse_key() == key
    assert request_for(problem, CANDIDATE, EvalSettings(no_gpu=True, atol=1e-2)).reuse_key() != key
    # Another torch times the reference anew.
    monkeypatch.setattr(cuda_env, "torch_version", lambda: "9.9.9")
    assert request.reuse_key() != key


def test_a_reused_verdict_brings_its_evidence(env):
    """The seed's registers and the like reach the prompts from a copy as from the original."""
    store = Store(env / "k.db")
    problem = load_problem(env / "twice.py", smoke=False)
    pid = store.upsert_problem(problem)
    request = request_for(problem, CANDIDATE, EvalSettings(no_gpu=True))
    resources = {"tool": "cuobjdump", "kernels": [
        {"symbol": "_Z6twicePf", "name": "twice", "registers": 16, "shared_bytes": 0,
         "stack_bytes": 0, "local_bytes": 0, "constant_bytes": 360}]}
    original = store.add_kernel(pid, CANDIDATE, origin="file")
    record(store, original, {**empty("unverified"), "reuse_key": request.reuse_key(),
                             "resources": resources})
    copy = store.add_kernel(pid, RESTYLED, origin="file")
    record(store, copy, reused_verdict(store, request_for(problem, RESTYLED,
                                                          EvalSettings(no_gpu=True))))
    reused_from = store.latest_evaluation(copy)["reused_from"]
    assert reused_from
    assert store.kernel_profiles(copy)["resources"]["data"] == resources
    # Said wherever the verdict is shown: the exported report and the app's table.
    text = render_markdown(kernel_report(store, copy))
    assert f"a copy of evaluation {reused_from}'s verdict" in text
    assert "a copy of" not in render_markdown(kernel_report(store, original))
    assert f"reused(e{reused_from})" in bench_flags(tui_queries.kernel(store, copy))
    assert "reused" not in bench_flags(tui_queries.kernel(store, original))


@pytest.fixture
def engine_env(tmp_path, monkeypatch):
    from llm_server import FakeLLMServer
    from test_search_engine import relu_problem

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer() as server:
        yield Store(tmp_path / "k.db"), relu_problem(tmp_path), server


def test_a_later_session_reuses_verdicts_of_the_same_sources(engine_env):
    """The search pays no GPU for a kernel verified before, in any session: the copy names its
    original. Asking to re-time one (the app's `t`) measures it again."""
    from test_search_engine import Script, start
    from workbench.search import resume_session

    store, problem, server = engine_env
    settings = dict(rounds=1, ideas=2, impls=1, repairs=0, refines=0)
    server.responder = Script()
    first, engine = start(store, problem, server, **settings)
    assert engine.run() == "finished" and len(engine.executor.requests) == 2
    server.responder = Script()   # the same answers again: the same two kernels
    second, engine = start(store, problem, server, **settings)
    assert engine.run() == "finished"
    assert engine.executor.requests == []
    kernels = store.rows("kernels", "session_id = ?", [second])
    copies = [store.latest_evaluation(k["id"]) for k in kernels]
    assert len(copies) == 2 and all(c["reused_from"] and c["trusted"] for c in copies)
    resume_session(store, second)   # as the app reopens a finished session for `t`
    engine.evaluate([kernels[0]["id"]], retime=True)
    assert len(engine.executor.requests) == 1
    assert store.latest_evaluation(kernels[0]["id"])["reused_from"] is None

