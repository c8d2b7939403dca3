"""The pipelined run: no idle rounds, varied branches, ideation in sequence, limits."""
from __future__ import annotations

import json
from datetime import datetime

from llm_server import FakeExecutor, Reply
from test_search_engine import Script, calls, env, kernel, provider  # noqa: F401 - env: fixture
from workbench.search import Engine, SearchSettings, default_concurrency, new_session


def span(call: dict) -> tuple[float, float]:
    end = datetime.fromisoformat(call["created_at"]).timestamp()
    return end - call["latency_s"], end


def session(store, problem, server, executor=None, **settings):
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(**settings))
    return sid, Engine(store, sid, provider(server), executor or FakeExecutor())


def test_next_round_ideates_while_the_last_repairs_run(env):
    store, problem, server = env
    ideas = iter(range(100))

    def answer(prompt, request):
        if "Propose" in prompt:
            n = next(ideas)
            return Reply(text=json.dumps([{"kind": "memory", "idea": f"Idea {n}: tile."},
                                          {"kind": "compute", "idea": f"Idea {n}: fuse."}]))
        if "Fix the attempt" in prompt:   # a slow repair
            return Reply(text=kernel("correct 1.1", "repaired"), delay_s=1.5)
        tag = str(len(server.requests))
        return Reply(text=kernel("compile_error" if "Idea 0: tile" in prompt else "correct 2.0",
                                 tag))

    server.responder = answer
    sid, engine = session(store, problem, server, rounds=2, ideas=2, impls=1, top_k=1)
    assert engine.run() == "finished"
    (repair,) = calls(store, sid, "repair")
    ideate1 = calls(store, sid, "ideate")[1]
    # Round 1's ideation started while round 0's repair was still being written.
    assert span(ideate1)[0] < span(repair)[1]
    assert store.get("sessions", sid)["status"] == "finished"
    # The repaired kernel was verified all the same, and nothing was left behind.
    assert store.latest_evaluation(store.rows("kernels", "origin = 'repair'")[0]["id"])
    assert engine.next_action() == "finished"


def test_implementations_of_an_idea_get_different_instructions(env):
    store, problem, server = env
    server.responder = Script()
    sid, engine = session(store, problem, server, rounds=1, ideas=1, impls=3)
    assert engine.run() == "finished"
    prompts = [c["prompt"] for c in calls(store, sid, "implement")]
    assert len(set(prompts)) == 3
    assert {f"implementation {i} of 3" in p for p in prompts for i in (1, 2, 3)} == {True, False}
    assert all(any(f"implementation {i} of 3" in p for p in prompts) for i in (1, 2, 3))
    # A single implementation gets no variant instruction.
    sid1, engine1 = session(store, problem, server, rounds=1, ideas=1, impls=1)
    assert engine1.run() == "finished"
    assert "implementation 1 of" not in calls(store, sid1, "implement")[0]["prompt"]


def test_a_rounds_seeds_ideate_in_sequence_and_see_each_others_ideas(env):
    store, problem, server = env
    count = iter(range(100))

    def answer(prompt, request):
        if "Propose" in prompt:
            n = next(count)
            return Reply(text=json.dumps([{"kind": k, "idea": f"Fresh {k} idea number {n}."}
                                          for k in ("memory", "compute")]))
        return Reply(text=kernel(f"correct {1 + len(server.requests) / 10}",
                                 str(len(server.requests))))

    server.responder = answer
    # Two ideas of two kinds: two archive cells, so round 1 has two seeds.
    sid, engine = session(store, problem, server, rounds=2, ideas=2, impls=1, top_k=2)
    assert engine.run() == "finished"
    ideate = calls(store, sid, "ideate")
    assert len(ideate) == 3        # the reference, then two seeds one after the other
    assert span(ideate[1])[1] <= span(ideate[2])[0] + 0.05
    assert "Fresh memory idea number 1." in ideate[2]["prompt"]


def test_gpu_time_budget_stops_and_roofline_goal_finishes(env):
    store, problem, server = env
    server.responder = Script({"Use float4 vectorized loads and stores.": ["correct 9.0"]})

    class Timed(FakeExecutor):
        def _verdict(self, request, *rest):
            return {**super()._verdict(request, *rest),
                    "phase_s": {"timing": 4.0, "warmup": 1.0}}

    sid, engine = session(store, problem, server, Timed(), rounds=3, ideas=3, impls=2,
                          budget_gpu_s=9.0)
    assert engine.run() == "stopped"
    reason = store.get("sessions", sid)["stop_reason"]
    assert reason.startswith("budget reached: verification used") and "GPU minutes" in reason
    assert 2 <= len(store.rows("evaluations")) <= 6

    sid2, engine2 = session(store, problem, server, rounds=3, ideas=3, impls=1,
                            stop_at_roofline=0.8)
    assert engine2.run() == "finished"
    session_row = store.get("sessions", sid2)
    assert session_row["stop_reason"].startswith("finished early: kernel")
    assert "90% of the roofline" in session_row["stop_reason"]
    assert len(store.rows("rounds", "session_id = ?", [sid2])) == 1


def test_wall_clock_budget_stops_a_run(env):
    store, problem, server = env
    slow = Script()
    server.responder = lambda prompt, request: Reply(text=slow(prompt, request).text,
                                                     delay_s=0.4)
    sid, engine = session(store, problem, server, rounds=5, ideas=2, impls=2,
                          budget_wall_s=1.0)
    assert engine.run() == "stopped"
    assert "minutes (resume to continue)" in store.get("sessions", sid)["stop_reason"]


def test_default_concurrency_fits_a_round():
    assert default_concurrency(SearchSettings()) == 8
    assert default_concurrency(SearchSettings(ideas=3, impls=2)) == 6
    assert default_concurrency(SearchSettings(ideas=1, impls=1)) == 4
