"""Language models: providers (OpenAI, Gemini, OpenAI-compatible), prompts, parsing, prices."""
from workbench.llm.base import Completion, Provider
from workbench.llm.errors import ProviderError
from workbench.llm.factory import PROVIDERS, load_config, make_provider

__all__ = ["Completion", "Provider", "ProviderError", "PROVIDERS", "load_config", "make_provider"]
