"""The kernel bank, lessons in prompts, several models per session, forks and comparisons."""
from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from llm_server import FakeExecutor, Reply
from test_search_engine import Script, calls, env, kernel, provider  # noqa: F401 - env: fixture
from workbench import bank
from workbench.cli import main
from workbench.fork import ForkError, compare, fork_session
from workbench.lessons import LessonError, add_lesson
from workbench.llm.prices import PriceTable
from workbench.model_report import model_table
from workbench.problems import Problem
from workbench.report import build_report, render_text
from workbench.search import Engine, SearchSettings, new_session
from workbench.search.models import build_roles, parse_spec

MATMUL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b
'''
GEMM_TILE = '''```python
import torch
import torch.nn as nn
# VERDICT: correct 3.0
src = "__global__ void mm(const float4* a) { __shared__ float tile[32][33]; }"

class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
```'''


def problem_of(tmp_path, name, source, family, min_bytes=8 << 20, flops=1 << 20):
    return Problem(name=name, path=tmp_path / f"{name}.py", source=source,
                   hash=hashlib.sha256(source.encode()).hexdigest(), family=family,
                   dtype="float32", atol=1e-4, rtol=1e-4, flops=flops, min_bytes=min_bytes)


def run_session(store, problem, server, responder, **settings):
    server.responder = responder
    sid = new_session(store, problem, "openai", "o3", server.openai_url,
                      SearchSettings(**settings))
    assert Engine(store, sid, provider(server), FakeExecutor()).run() == "finished"
    return sid


def matmul_session(store, server, tmp_path):
    def answer(prompt, request):
        if "Propose" in prompt:
            return Reply(text='[{"kind": "memory", "idea": "Tile A and B in shared memory."}]')
        return Reply(text=GEMM_TILE)
    mm = problem_of(tmp_path, "matmul_fp32", MATMUL, "matmul", min_bytes=200 << 20,
                    flops=1 << 37)
    return run_session(store, mm, server, answer, rounds=1, ideas=1, impls=1)


def test_bank_lists_verified_kernels_and_filters(env, tmp_path):
    store, relu, server = env
    run_session(store, relu, server, Script({"Unroll the loop four times.": ["incorrect"]}),
                rounds=1, ideas=3, impls=1, repairs=0)
    matmul_session(store, server, tmp_path)
    everything = bank.search(store)
    # Verified only (the incorrect one is out), each distinct source once per problem.
    assert {e["problem"] for e in everything} == {"relu", "matmul_fp32"}
    assert all(e["time_ms"] is not None for e in everything)
    mm = bank.search(store, "family:matmul")
    assert len(mm) == 1 and mm[0]["techniques"] == ["smem", "vec"]
    assert mm[0]["shape"] == "large-compute" and mm[0]["dtype"] == "float32"
    assert bank.search(store, "technique:smem") == mm
    assert bank.search(store, "relu dtype:float32 shape:small-memory")
    assert bank.search(store, "dtype:float16") == []
    assert bank.search(store, "family:matmul", limit=0) == mm
    text = bank.format_table(everything)
    assert "matmul_fp32" in text and "smem+vec" in text


def test_a_new_session_seeds_from_a_related_problems_kernel(env, tmp_path):
    store, relu, server = env
    matmul_session(store, server, tmp_path)
    (gemm,) = bank.search(store, "family:matmul")
    conv = problem_of(tmp_path, "conv2d", MATMUL.replace("a @ b", "a @ b + 0"), "convolution")
    sid = run_session(store, conv, server, Script(), rounds=1, ideas=1, impls=1,
                      seed_kernels=[gemm["kernel"]])
    round0 = store.rows("rounds", "session_id = ?", [sid])[0]
    assert json.loads(round0["seeds"]) == [None, gemm["kernel"]]
    assert "from the bank" in json.loads(round0["seed_reasons"])[1]["reason"]
    prompts = [c["prompt"] for c in calls(store, sid, "ideate")]
    from_bank = [p for p in prompts if f"Kernel {gemm['kernel']}, from the kernel bank" in p]
    assert len(from_bank) == 1 and "`matmul_fp32` (matmul, float32)" in from_bank[0]
    # Ideation of the convolution also sees the related GEMM kernel as an example.
    assert all("Related verified kernels" in p and "for `matmul_fp32`" in p for p in prompts)


def test_lessons_reach_later_ideation_of_the_family(env, tmp_path):
    store, relu, server = env
    sid = run_session(store, relu, server, Script(), rounds=1, ideas=1, impls=1)
    first = calls(store, sid, "ideate")[0]["prompt"]
    assert "None recorded for this op family yet." in first
    k = store.rows("kernels", "session_id = ?", [sid])[0]["id"]
    add_lesson(store, "  float4 loads need 16-byte alignment:  check it ", kernel_id=k)
    add_lesson(store, "Tensor cores need fp16 inputs.", family="matmul")
    sid2 = run_session(store, relu, server, Script(), rounds=1, ideas=1, impls=1)
    prompt = calls(store, sid2, "ideate")[0]["prompt"]
    assert f"- float4 loads need 16-byte alignment: check it (about kernel {k})" in prompt
    assert "Tensor cores" not in prompt    # another family's lesson
    with pytest.raises(LessonError, match="op family"):
        add_lesson(store, "no family here")
    with pytest.raises(LessonError, match="no kernel 999"):
        add_lesson(store, "x", kernel_id=999)


def test_two_providers_attribute_calls_tokens_and_cost(env, monkeypatch):
    store, relu, server = env
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini")
    server.responder = Script()
    prices = PriceTable({"o3": (2.0, 8.0), "gemini-2.5-pro": (1.25, 10.0)})
    models = {"ideate": [parse_spec(f"ideate=openai:o3@{server.openai_url}")[1]],
              "implement": [parse_spec(f"implement=gemini:gemini-2.5-pro@{server.url}")[1]]}
    sid = new_session(store, relu, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=1, ideas=3, impls=2, models=models))
    roles = build_roles(models, prices=prices, timeout_s=5, retries=1)
    assert Engine(store, sid, provider(server), FakeExecutor(), roles=roles).run() == "finished"
    by_model = {(c["provider"], c["model"], c["purpose"]) for c in calls(store, sid)}
    assert {m for m in by_model if m[2] in ("ideate", "implement")} == {
        ("openai", "o3", "ideate"), ("gemini", "gemini-2.5-pro", "implement")}
    # Roles not named (refine here) use the session's own model.
    assert {m[:2] for m in by_model if m[2] not in ("ideate", "implement")} <= {("openai", "o3")}
    assert any(":generateContent" in r.path for r in server.requests)
    table = {r["model"]: r for r in model_table(store, [sid])}
    for model, (price_in, price_out) in (("o3", (2.0, 8.0)),
                                         ("gemini-2.5-pro", (1.25, 10.0))):
        rows = [c for c in calls(store, sid) if c["model"] == model]
        assert table[model]["calls"] == len(rows)
        assert table[model]["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in rows))
        assert table[model]["tokens_in"] == sum(c["tokens_in"] for c in rows)
    for model in table:
        written = store.db.execute(
            "select count(*) from kernels k join llm_calls c on c.id = k.llm_call_id "
            "where k.session_id = ? and c.model = ? and k.duplicate_of is null",
            [sid, model]).fetchone()[0]
        assert table[model]["kernels"] == written
    assert table["gemini-2.5-pro"]["kernels"] == 6
    assert table["gemini-2.5-pro"]["correct_pct"] == 100.0
    report = build_report(store, [str(sid)])
    assert report["models"] == model_table(store, [sid])
    text = render_text(report)
    assert "per model" in text and "gemini / gemini-2.5-pro" in text


def test_a_weighted_mix_alternates_models(env, monkeypatch):
    store, relu, server = env
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini")
    server.responder = Script()
    models = {"implement": [
        {"provider": "openai", "model": "o3", "weight": 2, "base_url": server.openai_url},
        {"provider": "gemini", "model": "gemini-2.5-pro", "weight": 1, "base_url": server.url}]}
    sid = new_session(store, relu, "openai", "o3", server.openai_url,
                      SearchSettings(rounds=1, ideas=3, impls=2, models=models))
    roles = build_roles(models, timeout_s=5, retries=1)
    assert Engine(store, sid, provider(server), FakeExecutor(), roles=roles).run() == "finished"
    models_used = [c["model"] for c in calls(store, sid, "implement")]
    assert models_used.count("o3") == 4 and models_used.count("gemini-2.5-pro") == 2


def test_model_specs_read_or_fail_in_one_line():
    role, spec = parse_spec("implement=gemini:gemini-2.5-pro*2@http://h:1/v1")
    assert role == "implement" and spec == {"provider": "gemini", "model": "gemini-2.5-pro",
                                             "weight": 2.0, "base_url": "http://h:1/v1"}
    for bad, words in (("implement", "ROLE=PROVIDER:MODEL"), ("write=openai:o3", "unknown role"),
                       ("ideate=acme:x", "unknown provider"), ("ideate=openai:o3*0", "weight")):
        with pytest.raises(ValueError, match=words):
            parse_spec(bad)


def test_fork_at_a_round_and_compare(env):
    store, relu, server = env
    sid = run_session(store, relu, server, Script(), rounds=2, ideas=2, impls=1, top_k=1)
    with pytest.raises(ForkError, match="fork at a round from 1 to 2"):
        fork_session(store, sid, 5)
    fork = fork_session(store, sid, 1, {"rounds": 2, "ideas": 1}, model="o3-mini")
    assert store.get("sessions", fork)["forked_from"] == sid
    copied = store.rows("rounds", "session_id = ?", [fork])
    assert [r["n"] for r in copied] == [0]
    original_r0 = store.rows("rounds", "session_id = ? and n = 0", [sid])[0]
    kernels0 = [k for k in store.rows("kernels", "session_id = ?", [fork])]
    assert len(kernels0) == len([k for k in store.rows("kernels", "session_id = ?", [sid])
                                 if store.kernel_round(k["id"]) == 0])
    assert all(store.latest_evaluation(k["id"]) for k in kernels0)
    # The fork continues at round 1 with its own settings; the copied calls cost it nothing.
    server.responder = Script()
    assert Engine(store, fork, provider(server), FakeExecutor()).run() == "finished"
    rounds = store.rows("rounds", "session_id = ?", [fork], order_by="n")
    assert [r["n"] for r in rounds] == [0, 1]
    assert len(calls(store, fork, "ideate")) == 2          # one copied, one its own
    assert len([c for c in calls(store, fork) if c["copied_from"] is None]) >= 1
    assert original_r0["id"] not in {r["id"] for r in rounds}
    rows = compare(store, [sid, fork])
    assert rows[1]["forked_from"] == sid and rows[1]["fork_round"] == 1
    own = [c for c in calls(store, fork) if c["copied_from"] is None]
    assert rows[1]["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in own))
    assert rows[0]["best_speedup_eager"] == 1.5 and rows[0]["fast_1"] is True


def test_cli_bank_lesson_fork_compare(env, tmp_path, monkeypatch):
    store, relu, server = env
    sid = run_session(store, relu, server, Script(), rounds=2, ideas=1, impls=1)
    db = str(store.path)
    runner = CliRunner()
    out = runner.invoke(main, ["bank", "--json", "family:activation", "--db", db])
    assert out.exit_code == 0, out.output
    found = json.loads(out.output)
    assert found and {e["problem"] for e in found} == {"relu"}
    out = runner.invoke(main, ["bank", "family:nothing", "--db", db])
    assert "no verified kernels match" in out.output
    out = runner.invoke(main, ["lesson", "--kernel", str(found[0]["kernel"]),
                               "smem index precompute helped", "--db", db])
    assert out.exit_code == 0 and "recorded for activation" in out.output
    out = runner.invoke(main, ["lesson", "--list", "--db", db])
    assert "[activation] smem index precompute helped" in out.output
    out = runner.invoke(main, ["lesson", "no family", "--db", db])
    assert out.exit_code == 2 and out.output.startswith("error: ")
    out = runner.invoke(main, ["fork", str(sid), "--at-round", "1", "--model-for",
                               "implement=gemini:gemini-2.5-pro", "--seed",
                               str(found[0]["kernel"]), "--db", db])
    assert out.exit_code == 0, out.output
    fork = int(out.output.split()[1])
    settings = json.loads(store.get("sessions", fork)["settings"])
    assert settings["models"]["implement"][0]["model"] == "gemini-2.5-pro"
    assert settings["seed_kernels"] == [found[0]["kernel"]]
    out = runner.invoke(main, ["fork", str(sid), "--at-round", "1", "--seed", "999",
                               "--db", db])
    assert out.exit_code == 2 and "no kernel 999" in out.output
    out = runner.invoke(main, ["fork", str(sid), "--at-round", "1", "--model-for", "oops",
                               "--db", db])
    assert out.exit_code == 2 and "ROLE=PROVIDER:MODEL" in out.output
    out = runner.invoke(main, ["compare", str(sid), str(fork), "--db", db])
    assert out.exit_code == 0 and f"s{sid}@r1" in out.output
    out = runner.invoke(main, ["compare", "999", "--db", db])
    assert out.exit_code == 2 and "no session 999" in out.output


def test_combine_merges_two_lineages_each_round(env):
    store, relu, server = env
    seen_prompts = []

    def answer(prompt, request):
        if "merges the strengths of both kernels" in prompt:
            seen_prompts.append(prompt)
            return Reply(text=kernel("correct 2.5", "combined"))
        return Script({"Use float4 vectorized loads and stores.": ["correct 2.0"],
                       "Unroll the loop four times.": ["correct 1.2"]})(prompt, request)

    sid = run_session(store, relu, server, answer, rounds=2, ideas=3, impls=1, top_k=1,
                      combine=True)
    (combined,) = store.rows("kernels", "session_id = ? and origin = 'combine'", [sid])
    first, second = combined["parent_id"], combined["second_parent_id"]
    assert store.latest_evaluation(first)["speedup_eager"] == 2.0
    assert first != second and store.latest_evaluation(combined["id"])["status"] == "correct"
    (prompt,) = seen_prompts
    assert f"Kernel {first}:" in prompt and f"Kernel {second}:" in prompt
    idea = store.get("ideas", combined["idea_id"])
    assert idea["author"] == "combine" and store.get("rounds", idea["round_id"])["n"] == 1
    (call,) = calls(store, sid, "combine")
    assert call["idea_id"] == idea["id"]
    # The operator on demand: any two kernels, verified at once; a pair is combined once.
    engine = Engine(store, sid, provider(server), FakeExecutor())
    store.update("sessions", sid, status="running")
    assert len(engine.combine(second, combined["id"])) == 1
    assert len(store.rows("kernels", "origin = 'combine'")) == 2


def test_run_with_models_per_role_bank_seeds_and_combine(env, tmp_path, monkeypatch):
    import workbench.headless as headless

    store, relu, server = env
    first = run_session(store, relu, server, Script(), rounds=1, ideas=1, impls=1)
    banked = bank.search(store, "family:activation")[0]     # the fastest
    monkeypatch.setattr(headless, "make_executor", lambda gpus, on_phase: FakeExecutor())
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-local")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    problem = tmp_path / "relu.py"
    problem.write_text(relu.source)
    script, extra = Script(), iter(range(1000))

    def answer(prompt, request):   # combine and refine prompts name no single idea
        if "## The idea" not in prompt and "Propose" not in prompt:
            return Reply(text=kernel("correct 1.1", f"other {next(extra)}"))
        return script(prompt, request)

    server.responder = answer
    args = ["run", str(problem), "--provider", "openai-compatible", "--model", "local",
            "--base-url", server.openai_url, "--retries", "0", "--timeout", "5",
            "--rounds", "2", "--ideas", "2", "--impls", "1", "--combine",
            "--model-for", f"implement=openai-compatible:coder@{server.openai_url}",
            "--seed-from-bank", "family:activation", "--db", str(store.path)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    sid = max(s["id"] for s in store.rows("sessions"))
    assert sid != first
    settings = json.loads(store.get("sessions", sid)["settings"])
    assert settings["seed_kernels"] == [banked["kernel"]] and settings["combine"] is True
    assert settings["provider_options"]["concurrency"] == 4
    models = {(c["purpose"], c["model"]) for c in calls(store, sid)}
    assert ("implement", "coder") in models and ("ideate", "local") in models
    assert all(m == "coder" for p, m in models if p == "implement")
    assert "from the bank: written for relu" in result.output
    bad = CliRunner().invoke(main, args[:-4] + ["--model-for", "implement=nope",
                                                "--db", str(store.path)])
    assert bad.exit_code == 2 and "ROLE=PROVIDER:MODEL" in bad.output
    none = CliRunner().invoke(main, args[:-4] + ["--seed-from-bank", "family:matmul",
                                                 "--db", str(store.path)])
    assert none.exit_code == 2 and "no verified kernel in the bank matches" in none.output
