"""Gemini through the official google-genai SDK (Gemini API, not Vertex), with a thinking budget."""
from __future__ import annotations

from workbench.llm import deadline
from workbench.llm.base import Provider, Reply
from workbench.llm.errors import ProviderError, TransientError


def _transport_errors() -> tuple[type[BaseException], ...]:
    # google-genai moved from httpx to httpx2; catch whichever transport it uses.
    found = []
    for module in ("httpx2", "httpx"):
        try:
            found.append(__import__(module).TransportError)
        except ImportError:
            continue
    return tuple(found)


class Gemini(Provider):
    name = "gemini"

    def __init__(self, model: str, base_url: str | None = None, *, api_key: str,
                 key_hint: str = "GEMINI_API_KEY", thinking_budget: int | None = None,
                 max_output_tokens: int | None = None, **common):
        from google import genai
        from google.genai import types

        super().__init__(model, base_url, **common)
        self.key_hint = key_hint
        self.thinking_budget = thinking_budget
        self.max_output_tokens = max_output_tokens
        self.redact.add(api_key)
        # The transport ends a response still arriving at the deadline (a dripping server).
        http = types.HttpOptions(base_url=base_url, timeout=int(self.timeout_s * 1000),
                                 retry_options=types.HttpRetryOptions(attempts=1),
                                 client_args={"transport": deadline.transport(self.timeout_s)})
        self._client = genai.Client(api_key=api_key, vertexai=False, http_options=http)
        self._transport_errors = _transport_errors()

    def options(self) -> dict:
        return {**super().options(), "thinking_budget": self.thinking_budget,
                "max_output_tokens": self.max_output_tokens}

    def _request(self, prompt: str, system: str | None) -> Reply:
        from google.genai import errors, types

        config = types.GenerateContentConfig(
            system_instruction=system or None, max_output_tokens=self.max_output_tokens,
            thinking_config=(types.ThinkingConfig(thinking_budget=self.thinking_budget)
                             if self.thinking_budget is not None else None))
        try:
            response = self._client.models.generate_content(model=self.model, contents=prompt,
                                                            config=config)
        except errors.APIError as e:
            message = " ".join(str(e.message or e).split())[:300]
            if e.code == 429:
                raise TransientError(f"rate limited (429): {message}") from None
            if e.code and e.code >= 500:
                raise TransientError(f"server error {e.code}: {message}") from None
            if e.code in (401, 403) or "API key" in message:
                raise ProviderError(f"{self.describe()}: the API key was rejected ({e.code}): "
                                    f"check {self.key_hint}") from None
            raise ProviderError(f"{self.describe()}: HTTP {e.code}: {message}") from None
        except self._transport_errors as e:
            kind = type(e).__name__
            if "Timeout" in kind:
                raise TransientError(f"no answer within {self.timeout_s:g} s") from None
            raise TransientError(f"cannot connect: {kind}: {e}") from None
        except (ValueError, AttributeError, TypeError) as e:
            # A body that is not a generateContent answer (proxies, gateways); pydantic's
            # ValidationError is a ValueError.
            message = " ".join(str(e).split())[:200]
            raise TransientError(f"malformed response: {type(e).__name__}: {message}") from None
        usage = getattr(response, "usage_metadata", None)
        tokens_in = tokens_out = thoughts = None
        if usage is not None:
            tokens_in = usage.prompt_token_count
            thoughts = usage.thoughts_token_count
            if usage.candidates_token_count is not None or thoughts is not None:
                # Thinking tokens are billed as output but reported apart from candidates.
                tokens_out = (usage.candidates_token_count or 0) + (thoughts or 0)
        try:
            text = response.text or ""
        except ValueError:  # a blocked or empty candidate
            text = ""
        return Reply(text=text, tokens_in=tokens_in, tokens_out=tokens_out,
                     tokens_reasoning=thoughts)
