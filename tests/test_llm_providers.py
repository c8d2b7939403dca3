"""The real openai and google-genai clients against a local server speaking their wire formats."""
from __future__ import annotations

import pytest

from llm_server import FakeLLMServer, Reply
from workbench.llm import ProviderError, make_provider
from workbench.llm.prices import PriceTable

FAST = dict(timeout_s=2.0, retries=2, backoff_s=0.01, max_backoff_s=0.05,
            prices=PriceTable({"o3": (2.0, 8.0), "gemini-2.5-pro": (1.25, 10.0)}))


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


def _openai(server, **kw):
    return make_provider("openai", "o3", server.openai_url, **{**FAST, **kw})


def _gemini(server, **kw):
    return make_provider("gemini", "gemini-2.5-pro", server.url, **{**FAST, **kw})


def test_openai_success_counts_tokens_reasoning_and_cost(server, keys):
    server.push(Reply(text="hello", tokens_in=1000, tokens_out=500, reasoning=300))
    c = _openai(server, reasoning_effort="high").complete("question", system="be brief")
    assert (c.text, c.tokens_in, c.tokens_out, c.tokens_reasoning, c.attempts) == \
        ("hello", 1000, 500, 300, 1)
    assert c.cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.body["reasoning_effort"] == "high" and req.body["model"] == "o3"
    assert req.prompt == "question" and req.system == "be brief"
    assert req.headers["authorization"] == "Bearer sk-test-openai"


def test_gemini_success_counts_thoughts_as_output(server, keys):
    server.push(Reply(text="bonjour", tokens_in=200, tokens_out=40, reasoning=60))
    c = _gemini(server, thinking_budget=2048).complete("question", system="be brief")
    assert (c.text, c.tokens_in, c.tokens_out, c.tokens_reasoning) == ("bonjour", 200, 100, 60)
    assert c.cost_usd == pytest.approx((200 * 1.25 + 100 * 10.0) / 1e6)
    req = server.requests[0]
    assert req.path.endswith("/models/gemini-2.5-pro:generateContent")
    assert req.headers["x-goog-api-key"] == "test-gemini-key"
    assert req.prompt == "question" and req.system == "be brief"
    thinking = req.body["generationConfig"]["thinkingConfig"]
    assert 2048 in thinking.values()


@pytest.mark.parametrize("make", [_openai, _gemini])
def test_429_then_success_is_retried(server, keys, make):
    server.push(Reply(status=429, text="slow down"), Reply(text="ok"))
    c = make(server).complete("q")
    assert c.text == "ok" and c.attempts == 2 and len(server.requests) == 2


@pytest.mark.parametrize("make", [_openai, _gemini])
def test_timeout_then_success_is_retried(server, keys, make):
    server.push(Reply(text="late", delay_s=0.8), Reply(text="on time"))
    c = make(server, timeout_s=0.3).complete("q")
    assert c.text == "on time" and c.attempts == 2


@pytest.mark.parametrize("make", [_openai, _gemini])
def test_server_errors_exhaust_retries_into_one_line(server, keys, make):
    server.push(*[Reply(status=503, text="overloaded")] * 3)
    with pytest.raises(ProviderError) as err:
        make(server).complete("q")
    assert err.value.transient and "gave up after 3 attempts" in str(err.value)
    assert "\n" not in str(err.value) and len(server.requests) == 3


@pytest.mark.parametrize("make", [_openai, _gemini])
def test_auth_failure_is_final_and_names_the_variable(server, keys, make):
    server.push(Reply(status=401, text="bad key"))
    with pytest.raises(ProviderError) as err:
        make(server).complete("q")
    assert not err.value.transient and len(server.requests) == 1
    assert "API_KEY" in str(err.value)


@pytest.mark.parametrize("make", [_openai, _gemini])
def test_malformed_body_is_an_error_not_a_crash(server, keys, make):
    server.push(Reply(raw_body=b"<html>gateway</html>"), Reply(raw_body=b"<html>again</html>"))
    with pytest.raises(ProviderError) as err:
        make(server, retries=1).complete("q")
    assert "malformed" in str(err.value) and "\n" not in str(err.value)


def test_openai_compatible_needs_no_key_and_sends_a_placeholder(server, monkeypatch):
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    server.push(Reply(text="local"))
    p = make_provider("openai-compatible", "qwen", server.openai_url, **FAST)
    assert p.complete("q").text == "local"
    assert p.complete is not None and server.requests[0].headers["authorization"] == "Bearer none"
    assert p.prices.lookup("qwen") is None


def test_usage_missing_is_estimated_from_the_text(server, keys):
    server.push(Reply(raw_body=b'{"id": "x", "object": "chat.completion", "created": 0, '
                               b'"model": "o3", "choices": [{"index": 0, "finish_reason": '
                               b'"stop", "message": {"role": "assistant", "content": "hi"}}]}'))
    c = _openai(server).complete("q" * 30)
    assert c.text == "hi" and c.tokens_estimated
    assert (c.tokens_in, c.tokens_out) == (10, 1) and c.cost_usd is not None


@pytest.mark.parametrize("name, env, fix", [
    ("openai", {}, "OPENAI_API_KEY"),
    ("gemini", {}, "GEMINI_API_KEY"),
    ("openai-compatible", {}, "--base-url"),
    (None, {}, "--provider"),
])
def test_missing_configuration_says_what_to_set(monkeypatch, name, env, fix):
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ProviderError) as err:
        make_provider(name, "m")
    assert fix in str(err.value) and "\n" not in str(err.value)


def test_google_api_key_is_accepted_for_gemini(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g")
    assert make_provider("gemini", "gemini-2.5-pro").name == "gemini"


def test_options_of_the_other_provider_are_refused(keys):
    with pytest.raises(ProviderError, match="thinking-budget"):
        make_provider("gemini", "gemini-2.5-pro", reasoning_effort="high")
    with pytest.raises(ProviderError, match="reasoning-effort"):
        make_provider("openai", "o3", thinking_budget=100)
