"""Pick a provider from flags and config; keys come only from the environment."""
from __future__ import annotations

import os
import tomllib
from typing import Any

from workbench.llm.base import Provider
from workbench.llm.errors import ProviderError
from workbench.user_dirs import config_file

PROVIDERS = ("openai", "gemini", "openai-compatible")
COMPATIBLE_KEY_ENV = "OPENAI_COMPATIBLE_API_KEY"
NO_PROVIDER = ("no LLM provider configured: pass --provider " + "{" + ",".join(PROVIDERS) + "}"
               " --model NAME (keys come from OPENAI_API_KEY / GEMINI_API_KEY)")
_OPENAI_ONLY = ("reasoning_effort",)
_GEMINI_ONLY = ("thinking_budget",)


def load_config() -> dict[str, Any]:
    """The [llm] table of $XDG_CONFIG_HOME/kernel-workbench/config.toml, or {} when absent.

    Keys: provider, model, base_url, reasoning_effort, thinking_budget, timeout_s, retries,
    concurrency, prices (a price file). Flags override each of them.
    """
    path = config_file()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ProviderError(f"{path}: cannot read: {e}") from None
    llm = data.get("llm", {})
    if not isinstance(llm, dict):
        raise ProviderError(f"{path}: [llm] must be a table")
    return llm


def make_provider(name: str | None, model: str | None, base_url: str | None = None,
                  **opts: Any) -> Provider:
    """A ready provider, or ProviderError whose str is the one-line fix (missing key, flag...)."""
    if not name:
        raise ProviderError(NO_PROVIDER)
    if name not in PROVIDERS:
        raise ProviderError(f"unknown provider {name!r}: use one of {', '.join(PROVIDERS)}")
    if not model:
        raise ProviderError(f"--model NAME is required with --provider {name}")
    opts = {k: v for k, v in opts.items() if v is not None}
    if name == "gemini":
        wrong = [k for k in _OPENAI_ONLY if k in opts]
        if wrong:
            raise ProviderError("--reasoning-effort applies to OpenAI models; use "
                                "--thinking-budget TOKENS with gemini")
        key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not key:
            raise ProviderError("no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY)")
        from workbench.llm.gemini import Gemini

        return Gemini(model, base_url, api_key=key, **opts)
    if any(k in opts for k in _GEMINI_ONLY):
        raise ProviderError("--thinking-budget applies to gemini; use --reasoning-effort "
                            "{low,medium,high} with OpenAI reasoning models")
    from workbench.llm.openai_chat import OpenAIChat

    if name == "openai":
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ProviderError("no OpenAI API key: set OPENAI_API_KEY (for a local server use "
                                "--provider openai-compatible --base-url URL)")
        return OpenAIChat(model, base_url, api_key=key, **opts)
    if not base_url:
        raise ProviderError("--base-url URL is required with --provider openai-compatible "
                            "(e.g. http://localhost:8000/v1 for vLLM)")
    # Local servers usually need no key; the SDK insists on one, so send a placeholder.
    key = os.environ.get(COMPATIBLE_KEY_ENV) or "none"
    return OpenAIChat(model, base_url, api_key=key, key_hint=COMPATIBLE_KEY_ENV,
                      name="openai-compatible", **opts)
