"""OpenAI chat completions through the official SDK: OpenAI itself and any compatible server
(vLLM, Ollama, llama.cpp server, gateways) by base URL."""
from __future__ import annotations

from workbench.llm import deadline
from workbench.llm.base import Provider, Reply
from workbench.llm.errors import ProviderError, TransientError


def _retry_after(error) -> float | None:
    try:
        return float(error.response.headers.get("retry-after"))
    except (AttributeError, TypeError, ValueError):
        return None


def _short(error) -> str:
    message = getattr(error, "message", None) or str(error)
    return " ".join(str(message).split())[:300]


class OpenAIChat(Provider):
    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, *, api_key: str,
                 key_hint: str = "OPENAI_API_KEY", name: str = "openai",
                 reasoning_effort: str | None = None, max_output_tokens: int | None = None,
                 **common):
        import openai

        super().__init__(model, base_url, **common)
        self.name = name
        self.key_hint = key_hint
        self.reasoning_effort = reasoning_effort
        self.max_output_tokens = max_output_tokens
        self.redact.add(api_key)
        # Retries are ours (uniform across providers, visible in the attempt count): SDK's off.
        # The transport ends a response still arriving at the deadline (a dripping server).
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=self.timeout_s, max_retries=0,
            http_client=openai.DefaultHttpxClient(transport=deadline.transport(self.timeout_s)))

    def options(self) -> dict:
        return {**super().options(), "reasoning_effort": self.reasoning_effort,
                "max_output_tokens": self.max_output_tokens}

    def _request(self, prompt: str, system: str | None) -> Reply:
        import openai

        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        extra = {}
        if self.reasoning_effort:
            extra["reasoning_effort"] = self.reasoning_effort
        if self.max_output_tokens:
            extra["max_completion_tokens"] = self.max_output_tokens
        try:
            response = self._client.chat.completions.create(model=self.model, messages=messages,
                                                            **extra)
        except openai.APITimeoutError:
            raise TransientError(f"no answer within {self.timeout_s:g} s") from None
        except openai.APIConnectionError as e:
            raise TransientError(f"cannot connect: {_short(e)}") from None
        except openai.RateLimitError as e:
            raise TransientError(f"rate limited (429): {_short(e)}", _retry_after(e)) from None
        except openai.AuthenticationError:
            raise ProviderError(f"{self.describe()}: the API key was rejected (401): check "
                                f"{self.key_hint}") from None
        except openai.APIStatusError as e:
            if e.status_code >= 500:
                raise TransientError(f"server error {e.status_code}: {_short(e)}",
                                     _retry_after(e)) from None
            raise ProviderError(f"{self.describe()}: HTTP {e.status_code}: {_short(e)}") from None
        except openai.OpenAIError as e:
            raise ProviderError(f"{self.describe()}: {_short(e)}") from None
        except ValueError as e:   # a body that is not the JSON it should be (proxies, gateways)
            raise TransientError(f"malformed response: {type(e).__name__}: {_short(e)}") from None
        try:
            text = response.choices[0].message.content if response.choices else ""
            usage = response.usage
            reasoning = None
            if usage is not None and usage.completion_tokens_details is not None:
                reasoning = usage.completion_tokens_details.reasoning_tokens
        except AttributeError as e:   # a JSON body of another shape
            raise TransientError(f"malformed response: {_short(e)}") from None
        return Reply(text=text or "",
                     tokens_in=usage.prompt_tokens if usage else None,
                     tokens_out=usage.completion_tokens if usage else None,
                     tokens_reasoning=reasoning)
