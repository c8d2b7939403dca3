"""The search loop end to end: real OpenAI client → local fake server, fake verifier."""
from __future__ import annotations

import hashlib
import json
import re
import threading

import pytest

from llm_server import FakeExecutor, FakeLLMServer, Reply
from workbench import control, events
from workbench.llm import make_provider
from workbench.llm.prices import PriceTable
from workbench.problems import Problem
from workbench.search import (Engine, SearchSettings, best_kernel, new_session, resume_session,
                              session_table, spent)
from workbench.store import Store

PROBLEM = '''"""Elementwise ReLU."""
import torch
import torch.nn as nn

FAMILY = "activation"
DTYPE = "float32"


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
'''

IDEAS = json.dumps([
    {"kind": "memory", "idea": "Use float4 vectorized loads and stores."},
    {"kind": "parallelism", "idea": "Use a grid-stride loop with 512 threads per block."},
    {"kind": "control_flow", "idea": "Unroll the loop four times."},
])


def kernel(verdict: str, tag: str = "") -> str:
    return (f"Here is the kernel.\n\n```python\nimport torch\nimport torch.nn as nn\n"
            f"# VERDICT: {verdict}\nTAG = {tag!r}\n\nclass ModelNew(nn.Module):\n"
            f"    def forward(self, x):\n        return x\n```\nIt should be fast.")


class Script:
    """Answers by prompt kind; implementations follow a per-idea plan of verdicts."""

    def __init__(self, plan=None, ideas=IDEAS):
        self.plan = plan or {}
        self.ideas = ideas
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, prompt: str, request) -> Reply:
        if "Propose" in prompt:
            return Reply(text=f"Sure.\n```json\n{self.ideas}\n```")
        if "Make it faster on this GPU" in prompt:   # refine: the plan's "refine" entry
            with self.lock:
                n = self.counts["refine"] = self.counts.get("refine", 0) + 1
            return Reply(text=kernel(self.plan.get("refine", "correct 1.0"), f"refine #{n}"))
        idea = re.search(r"## The idea (?:to implement|being implemented) \((\w+)\)\n\n(.*)\n",
                         prompt).group(2)
        key = ("repair:" if "Fix the attempt" in prompt else "") + idea
        with self.lock:
            n = self.counts[key] = self.counts.get(key, 0) + 1
        verdicts = self.plan.get(key, ["correct 1.5"])
        return Reply(text=kernel(verdicts[min(n, len(verdicts)) - 1], f"{key} #{n}"))


def relu_problem(tmp_path) -> Problem:
    # Described by hand: the engine needs no torch (load_problem is the CLI's business).
    return Problem(name="relu", path=tmp_path / "relu.py", source=PROBLEM,
                   hash=hashlib.sha256(PROBLEM.encode()).hexdigest(), family="activation",
                   dtype="float32", atol=1e-4, rtol=1e-4, flops=1 << 20, min_bytes=8 << 20)


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = Store(tmp_path / "k.db")
    with FakeLLMServer() as server:
        yield store, relu_problem(tmp_path), server


def provider(server, **kw):
    return make_provider("openai", "o3", server.openai_url, timeout_s=5, retries=1,
                         backoff_s=0.01, max_backoff_s=0.02, concurrency=3,
                         prices=PriceTable({"o3": (2.0, 8.0)}), **kw)


def start(store, problem, server, seen=None, **settings):
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(**settings))
    return sid, Engine(store, sid, provider(server), FakeExecutor(),
                       on_event=(seen.append if seen is not None else None))


def calls(store, sid, purpose=None):
    return store.rows("llm_calls", "session_id = ?" + (" and purpose = ?" if purpose else ""),
                      [sid, purpose] if purpose else [sid])


def test_two_rounds_end_to_end(env):
    store, problem, server = env
    memory = "Use float4 vectorized loads and stores."
    unroll = "Unroll the loop four times."
    script = Script({memory: ["correct 2.0", "compile_error"], unroll: ["incorrect"],
                     "repair:" + unroll: ["correct 1.2"], "repair:" + memory: ["correct 1.8"]})
    server.responder = script
    seen: list = []
    sid, engine = start(store, problem, server, seen, rounds=2, ideas=3, impls=2, top_k=1,
                        repairs=1)
    assert engine.run() == "finished"

    rounds = store.rows("rounds", "session_id = ?", [sid])
    assert [r["n"] for r in rounds] == [0, 1]
    assert json.loads(rounds[0]["seeds"]) == [None]
    best0 = json.loads(rounds[1]["seeds"])
    assert len(best0) == 1
    assert store.latest_evaluation(best0[0])["speedup_eager"] == 2.0

    # Round 0: 3 ideas x 2 impls, each failure repaired once; round 1's ideation restates
    # the same 3 ideas: merged into round 0's as echoes, not implemented again.
    assert len(calls(store, sid, "ideate")) == 2
    assert len(calls(store, sid, "implement")) == 6
    assert len(store.rows("ideas")) == 3
    echoes = store.rows("idea_echoes")
    assert len(echoes) == 3 and {e["round_id"] for e in echoes} == {rounds[1]["id"]}
    table = session_table(store, sid)
    assert {row["status"] for row in table} >= {"correct", "compile_error", "incorrect"}
    repairs = [row for row in table if row["origin"] == "repair"]
    assert repairs and all(row["attempt"] == 1 for row in repairs)
    for row in repairs:
        parent = store.get("kernels", store.get("kernels", row["kernel"])["parent_id"])
        assert store.latest_evaluation(parent["id"])["status"] in ("compile_error", "incorrect")
    # Every kernel evaluated exactly once.
    counts = store.db.execute("select count(*) from evaluations group by kernel_id").fetchall()
    assert {c[0] for c in counts} == {1}

    # Round 1 ideation saw the seed's code and numbers, and the history with outcomes.
    ideate1 = calls(store, sid, "ideate")[1]["prompt"]
    assert f"Kernel {best0[0]}" in ideate1 and "2.00x vs PyTorch eager" in ideate1
    assert f"[memory] {memory} → correct, 2.00x vs eager" in ideate1
    favour = ideate1.split("Favour kinds not tried yet in this session: ")[1].split(".")[0]
    assert favour == "asynchrony, precision, compute"
    # Implementation prompts carry our compile conventions.
    impl = calls(store, sid, "implement")[0]["prompt"]
    assert "class ModelNew(nn.Module)" in impl and "load_inline" in impl
    flat = " ".join(impl.split())
    assert "raw pointers" in flat and "no try/except" in flat and "local GPU only" in flat

    # Tokens and cost for every call; events for everything.
    tokens, dollars = spent(store, sid)
    n_calls = len(calls(store, sid))
    assert tokens == n_calls * 150 and dollars == pytest.approx(n_calls * 600e-6)
    assert sum(isinstance(e, events.LLMCallDone) for e in seen) == n_calls
    assert sum(isinstance(e, events.VerdictReady) for e in seen) == len(table)
    assert [e.n for e in seen if isinstance(e, events.RoundStarted)] == [0, 1]
    assert isinstance(seen[-1], events.SessionStopped) and seen[-1].reason == "finished"
    assert best_kernel(store, sid)["speedup_eager"] == 2.0
    ideas = store.rows("ideas")
    assert {i["status"] for i in ideas} == {"implemented"}
    assert {i["kind"] for i in ideas} == {"memory", "parallelism", "control_flow"}
    # The key never reaches the database.
    assert "sk-test" not in "".join(str(r) for r in store.rows("llm_calls"))
    assert "sk-test" not in store.get("sessions", sid)["settings"]


def test_no_code_and_no_ideas_are_stored_failures(env):
    store, problem, server = env
    server.push(Reply(text="1. Use shared memory tiling\n2. Unroll the loop"),
                Reply(text="I would rather not write code today."),
                Reply(text="Still no code."))
    sid, engine = start(store, problem, server, rounds=1, ideas=2, impls=1)
    assert engine.run() == "finished"
    implement = calls(store, sid, "implement")
    assert [c["error_kind"] for c in implement] == ["no_code", "no_code"]
    # The two implement calls run concurrently: either may get either reply.
    assert sorted(c["response"] for c in implement) == ["I would rather not write code today.",
                                                        "Still no code."]
    assert store.rows("kernels") == []

    server.push(Reply(text="Nothing useful here."))
    sid2, engine2 = start(store, problem, server, rounds=1, ideas=2, impls=1)
    assert engine2.run() == "finished"
    (ideate,) = calls(store, sid2, "ideate")
    assert ideate["error_kind"] == "no_ideas" and ideate["response"] == "Nothing useful here."


def test_review_gates_implementation(env):
    store, problem, server = env
    server.responder = Script()
    seen: list = []
    sid, engine = start(store, problem, server, seen, rounds=1, ideas=3, impls=1, review=True)
    assert engine.run() == "review"
    pending = engine.pending_review()
    assert len(pending) == 3 and not store.rows("kernels")
    assert any(isinstance(e, events.ReviewNeeded) and e.idea_ids == pending for e in seen)
    control.approve_idea(store, pending[0])
    control.veto_idea(store, pending[1])
    control.edit_idea(store, pending[2], "Unroll the loop eight times.")
    human = control.add_idea(store, store.rows("rounds")[0]["id"], "Use __ldg loads for x.")
    assert engine.run() == "finished"
    implemented = {c["idea_id"] for c in calls(store, sid, "implement")}
    assert implemented == {pending[0], pending[2], human}
    prompts = " ".join(c["prompt"] for c in calls(store, sid, "implement"))
    assert "Unroll the loop eight times." in prompts and "Use __ldg loads for x." in prompts
    assert store.get("ideas", pending[1])["status"] == "vetoed"
    assert store.get("ideas", human)["author"] == "human"
    with pytest.raises(control.ControlError):
        control.edit_idea(store, pending[0], "too late")


def test_review_callback_decides_inside_run(env):
    store, problem, server = env
    server.responder = Script()
    sid, engine = start(store, problem, server, rounds=1, ideas=2, impls=1, review=True)

    def review(idea_ids):
        for idea_id in idea_ids:
            control.veto_idea(store, idea_id)

    assert engine.run(review=review) == "finished"
    assert calls(store, sid, "implement") == []


def test_budget_stops_cleanly_and_resume_continues(env):
    store, problem, server = env
    server.responder = Script()
    seen: list = []
    sid, engine = start(store, problem, server, seen, rounds=1, ideas=2, impls=2,
                        budget_tokens=300)
    assert engine.run() == "stopped"
    session = store.get("sessions", sid)
    assert session["status"] == "stopped" and "budget reached" in session["stop_reason"]
    assert "--budget-tokens" in session["stop_reason"]
    used = len(calls(store, sid))
    assert 2 <= used <= 1 + 3   # ideation + implementations until the budget, overshoot <= slots
    resume_session(store, sid, budget_tokens=10_000)
    engine2 = Engine(store, sid, provider(server), FakeExecutor())
    assert engine2.run() == "finished"
    assert len(calls(store, sid, "ideate")) == 1
    assert len(calls(store, sid, "implement")) == 4


def test_dollar_budget_needs_a_price(env):
    store, problem, server = env
    sid = new_session(store, problem, "openai-compatible", "local", server.openai_url,
                      SearchSettings(budget_usd=1.0))
    p = make_provider("openai-compatible", "local", server.openai_url,
                      prices=PriceTable({}))
    from workbench.search import SearchError
    with pytest.raises(SearchError, match="--budget-tokens"):
        Engine(store, sid, p, FakeExecutor())


class Crash(BaseException):
    """Stands in for kill -9: unwinds without any cleanup the engine could do."""


def test_resume_after_a_crash_redoes_nothing(env):
    store, problem, server = env
    server.responder = Script()
    verdicts = []

    def crash_after_two(event):
        if isinstance(event, events.VerdictReady):
            verdicts.append(event)
            if len(verdicts) == 2:
                raise Crash

    sid, engine = start(store, problem, server, rounds=2, ideas=3, impls=2, top_k=2)
    engine.on_event = crash_after_two
    with pytest.raises(Crash):
        engine.run()
    assert store.get("sessions", sid)["status"] == "running"
    before = {c["id"] for c in calls(store, sid)}
    evaluated_before = {e["kernel_id"] for e in store.rows("evaluations")}
    assert evaluated_before

    engine2 = Engine(store, sid, provider(server), FakeExecutor())
    assert engine2.run() == "finished"
    implement = calls(store, sid, "implement")
    per_idea = {}
    for c in implement:
        per_idea[c["idea_id"]] = per_idea.get(c["idea_id"], 0) + 1
    assert set(per_idea.values()) == {2}
    ideate = calls(store, sid, "ideate")
    assert len({(c["round_id"], c["kernel_id"]) for c in ideate}) == len(ideate)
    counts = store.db.execute("select count(*) from evaluations group by kernel_id").fetchall()
    assert {c[0] for c in counts} == {1}
    assert before <= {c["id"] for c in calls(store, sid)}


def test_cancel_marks_stopped_and_resume_finishes(env):
    store, problem, server = env
    server.responder = Script()
    sid, engine = start(store, problem, server, rounds=1, ideas=3, impls=2)

    def cancel_on_first_kernel(event):
        if isinstance(event, events.KernelAdded):
            engine.cancel("interrupted")

    engine.on_event = cancel_on_first_kernel
    assert engine.run() == "stopped"
    assert store.get("sessions", sid)["stop_reason"] == "interrupted"
    resume_session(store, sid)
    assert Engine(store, sid, provider(server), FakeExecutor()).run() == "finished"
    assert len(calls(store, sid, "implement")) == 6
    assert all(store.latest_evaluation(k["id"]) for k in store.rows("kernels"))


def test_api_failure_stops_and_resume_retries_the_call(env):
    store, problem, server = env
    server.push(Reply(status=500), Reply(status=500))
    sid, engine = start(store, problem, server, rounds=1, ideas=1, impls=1)
    assert engine.run() == "stopped"
    assert "gave up after 2 attempts" in store.get("sessions", sid)["stop_reason"]
    assert calls(store, sid)[0]["error_kind"] == "api"
    server.responder = Script()
    resume_session(store, sid)
    assert Engine(store, sid, provider(server), FakeExecutor()).run() == "finished"
    assert len(calls(store, sid, "ideate")) == 2 and len(calls(store, sid, "implement")) == 1


def test_human_controls_steer_seeds(env):
    store, problem, server = env
    fast = "Use float4 vectorized loads and stores."
    slow = "Use a grid-stride loop with 512 threads per block."
    flagged = "Unroll the loop four times."
    server.responder = Script({fast: ["correct 3.0"], slow: ["correct 1.1"],
                               flagged: ["flagged 50"]})
    sid, engine = start(store, problem, server, rounds=1, ideas=3, impls=1, top_k=1, repairs=0,
                        refines=0)
    assert engine.run() == "finished"
    by_idea = {store.get("ideas", k["idea_id"])["text"]: k["id"] for k in store.rows("kernels")}
    # Pinned kernels seed; pruned branches don't; flagged kernels seed only once cleared.
    assert engine._choose_seeds(1) == [by_idea[fast]]
    control.pin_kernel(store, by_idea[slow])
    assert engine._choose_seeds(1) == [by_idea[fast], by_idea[slow]]
    child = control.add_child_kernel(store, by_idea[fast], kernel("correct 4.0"))
    pruned = control.prune_kernel(store, by_idea[fast])
    assert set(pruned) == {by_idea[fast], child}
    control.clear_kernel(store, by_idea[flagged])
    assert engine._choose_seeds(1) == [by_idea[flagged], by_idea[slow]]
    with pytest.raises(control.ControlError):
        control.clear_kernel(store, by_idea[slow])
    control.prune_kernel(store, by_idea[fast], pruned=False)
    # The human child kernel gets evaluated by the next step, without any LLM.
    resume_session(store, sid)
    e2 = Engine(store, sid, None, FakeExecutor())
    assert e2.next_action() == "evaluate"
    e2.step()
    assert store.latest_evaluation(child)["speedup_eager"] == 4.0


def test_without_a_provider_evaluation_works_and_ideation_says_what_to_set(env):
    store, problem, server = env
    sid = new_session(store, problem, None, None, None, SearchSettings(rounds=1))
    r = store.create_round(sid, 0)
    store.update("rounds", r, seeds=[None])
    idea = control.add_idea(store, r, "Hand-written idea")
    seen: list = []
    engine = Engine(store, sid, None, FakeExecutor(), on_event=seen.append)
    assert engine.run() == "stopped"
    reason = store.get("sessions", sid)["stop_reason"]
    assert "--provider" in reason and "OPENAI_API_KEY" in reason
    assert store.get("ideas", idea)["status"] == "approved"


def test_no_gpu_marks_unverified_and_still_seeds(env):
    store, problem, server = env
    server.responder = Script()
    from workbench.gpu.executor import EvalSettings
    sid, engine = start(store, problem, server, rounds=2, ideas=1, impls=1,
                        eval=EvalSettings(no_gpu=True))
    assert engine.run() == "finished"
    statuses = {row["status"] for row in session_table(store, sid)}
    assert statuses == {"unverified"}
    seeds = json.loads(store.rows("rounds", "session_id = ? and n = 1", [sid])[0]["seeds"])
    assert seeds != [None]


def test_the_same_engine_continues_after_resume_with_new_settings(env):
    store, problem, server = env
    server.responder = Script()
    sid, engine = start(store, problem, server, rounds=1, ideas=2, impls=2, budget_tokens=150)
    assert engine.ideate() is not None               # the one call the budget allows
    assert engine.implement() == []                  # stops instead of raising
    assert "budget reached" in store.get("sessions", sid)["stop_reason"]
    assert engine.step() is False
    resume_session(store, sid, budget_tokens=10_000)
    assert engine.run() == "finished"
    assert len(calls(store, sid, "implement")) == 4
