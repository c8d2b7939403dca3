"""LLM calls keep their limits: the timeout bounds the whole call (a dripping server is cut off),
a token budget holds when the server reports no usage, and keys are never stored or printed."""
from __future__ import annotations

import dataclasses
import time

import pytest
from click.testing import CliRunner

import workbench.headless as headless
from llm_server import FakeExecutor, FakeLLMServer, Reply
from test_llm_providers import keys, server  # noqa: F401 - fixtures
from test_search_engine import PROBLEM, Script, calls, env, start  # noqa: F401 - fixture
from workbench.cli import main
from workbench.llm import ProviderError, make_provider
from workbench.llm.base import estimate_tokens
from workbench.llm.prices import PriceTable
from workbench.llm.redact import redact_url
from workbench.search import spent
from workbench.store import Store

PRICES = PriceTable({"o3": (2.0, 8.0), "gemini-2.5-pro": (1.25, 10.0)})
SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_timeout_bounds_the_whole_call_against_a_dripping_server(server, keys, kind):
    # ~600 bytes, one every 0.1 s: each read is quick, the answer would take a minute.
    server.push(Reply(text="x" * 400, drip_s=0.1))
    url = server.openai_url if kind == "openai" else server.url
    model = "o3" if kind == "openai" else "gemini-2.5-pro"
    provider = make_provider(kind, model, url, timeout_s=2.0, retries=0, prices=PRICES)
    t0 = time.monotonic()
    with pytest.raises(ProviderError, match=r"answer within 2 s"):
        provider.complete("question")
    assert time.monotonic() - t0 < 4.0
    # The abandoned request stops reading too (the transport cuts it at the deadline).
    deadline = time.monotonic() + 6
    while not server.hangups and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.hangups and server.hangups[0] - t0 < 5.0


def test_a_slow_but_steady_answer_within_the_timeout_still_arrives(server, keys):
    server.push(Reply(text="ok", drip_s=0.002))
    provider = make_provider("openai", "o3", server.openai_url, timeout_s=5.0, retries=0,
                             prices=PRICES)
    assert provider.complete("q").text == "ok"


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_no_usage_is_estimated_and_marked(server, keys, kind):
    server.push(Reply(text="y" * 300, usage=False))
    url = server.openai_url if kind == "openai" else server.url
    model = "o3" if kind == "openai" else "gemini-2.5-pro"
    c = make_provider(kind, model, url, retries=0, prices=PRICES).complete("p" * 600,
                                                                           system="s" * 60)
    assert c.tokens_estimated
    assert (c.tokens_in, c.tokens_out) == (estimate_tokens("p" * 600) + 20, 100)
    assert c.cost_usd is not None and c.cost_usd > 0


def test_token_budget_holds_without_usage(env):
    store, problem, server = env
    script = Script()
    server.responder = lambda prompt, request: dataclasses.replace(script(prompt, request),
                                                                    usage=False)
    sid, engine = start(store, problem, server, rounds=3, ideas=3, impls=2,
                        budget_tokens=2000)
    assert engine.run() == "stopped"
    reason = store.get("sessions", sid)["stop_reason"]
    assert reason.startswith("budget reached") and "2,000 tokens" in reason
    rows = calls(store, sid)
    assert rows and all(r["tokens_estimated"] == 1 and r["tokens_in"] > 0 for r in rows)
    used = spent(store, sid)[0]   # over by at most the calls in flight (concurrency 3)
    assert 2000 <= used < 2000 + 3 * max(r["tokens_in"] + r["tokens_out"] for r in rows)
    assert len(rows) < 3 * 3 * 2


def test_keys_echoed_by_the_server_are_redacted(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    provider = make_provider("openai", "o3", server.openai_url, retries=0, prices=PRICES)
    server.responder = lambda prompt, request: Reply(
        text=f"you sent {request.headers['authorization']}")
    c = provider.complete("q")
    assert SECRET not in c.text and "[redacted]" in c.text
    server.responder = lambda prompt, request: Reply(status=400, text=f"bad key {SECRET}")
    with pytest.raises(ProviderError) as e:
        provider.complete("q")
    assert SECRET not in str(e.value) and "[redacted]" in str(e.value)


def test_gemini_key_echoed_in_an_error_is_redacted(server, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    provider = make_provider("gemini", "gemini-2.5-pro", server.url, retries=0, prices=PRICES)
    server.responder = lambda prompt, request: Reply(
        status=400, text=f"API key not valid: {request.headers.get('x-goog-api-key')}")
    with pytest.raises(ProviderError) as e:
        provider.complete("q")
    assert SECRET not in str(e.value)


def test_base_url_key_is_never_stored_or_printed(tmp_path, monkeypatch):
    monkeypatch.setattr(headless, "make_executor", lambda gpus, on_phase: FakeExecutor())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("KERNEL_WORKBENCH_DB", raising=False)
    problem = tmp_path / "relu.py"
    problem.write_text(PROBLEM)
    db = tmp_path / "k.db"
    script = Script()

    def echo(prompt, request):   # a gateway that repeats the URL it was called with
        reply = script(prompt, request)
        return dataclasses.replace(reply, text=reply.text + f"\n(via {request.path})")

    with FakeLLMServer(responder=echo) as server:
        url = f"{server.openai_url}?key={SECRET}&api-version=2024-10-21"
        args = ["run", str(problem), "--provider", "openai-compatible", "--model", "local",
                "--base-url", url, "--retries", "0", "--rounds", "1", "--ideas", "1",
                "--impls", "1", "--db", str(db)]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
        assert any(SECRET in r.path for r in server.requests)   # it did travel, as asked
        store = Store(db)
        assert store.get("sessions", 1)["base_url"] == redact_url(url)
        assert "key=REDACTED&api-version=2024-10-21" in store.get("sessions", 1)["base_url"]
        assert SECRET.encode() not in db.read_bytes()
        assert any("[redacted]" in (c["response"] or "") for c in store.rows("llm_calls"))

        # Resuming without the key says so in one line instead of calling with "REDACTED".
        result = CliRunner().invoke(main, ["run", "--resume", "1", "--db", str(db)])
        assert result.exit_code == 2 and "pass --base-url again" in result.output
