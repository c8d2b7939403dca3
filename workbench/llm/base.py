"""What every provider shares: retries with backoff, a concurrency limit, a whole-call
timeout, tokens (estimated when the server reports none) and cost, and redaction of keys."""
from __future__ import annotations

import math
import random
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from workbench.llm.deadline import bounded
from workbench.llm.errors import ProviderError, TransientError
from workbench.llm.prices import PriceTable
from workbench.llm.redact import Redactor, redact_url, url_secrets

__all__ = ["Completion", "Provider", "Reply", "estimate_tokens", "redact_url"]
CHARS_PER_TOKEN = 3   # code and English run 3-4; the low end keeps an estimated budget safe


@dataclass
class Completion:
    text: str
    tokens_in: int | None
    tokens_out: int | None          # every billed output token, reasoning included
    tokens_reasoning: int | None    # the reasoning part of tokens_out, where reported
    latency_s: float
    cost_usd: float | None
    attempts: int
    provider: str | None = None     # who answered (several models can serve one session)
    model: str | None = None
    tokens_estimated: bool = False  # the server reported no usage: counted from text length


@dataclass
class Reply:
    """One successful HTTP answer, as a provider subclass reads it."""
    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_reasoning: int | None = None


def estimate_tokens(text: str | None) -> int:
    """Tokens in a text, estimated from its length (rounded up: a budget errs on the safe side)."""
    return math.ceil(len(text or "") / CHARS_PER_TOKEN)


class Provider(ABC):
    """A chat model behind an SDK. Subclasses implement `_request` (one attempt)."""

    name = "provider"

    def __init__(self, model: str, base_url: str | None = None, *, timeout_s: float = 600.0,
                 retries: int = 4, backoff_s: float = 2.0, max_backoff_s: float = 60.0,
                 concurrency: int = 4, prices: PriceTable | None = None):
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.concurrency = concurrency
        self.prices = prices if prices is not None else PriceTable.load()
        self._slots = threading.Semaphore(max(1, concurrency))
        # Subclasses add their API key; answers, errors and descriptions pass through this.
        self.redact = Redactor(*url_secrets(base_url))

    def describe(self) -> str:
        where = f" at {redact_url(self.base_url)}" if self.base_url else ""
        return f"{self.name} {self.model}{where}"

    def options(self) -> dict:
        """Settings worth recording with a session (never the key)."""
        return {"timeout_s": self.timeout_s, "retries": self.retries, "backoff_s": self.backoff_s,
                "concurrency": self.concurrency}

    def has_price(self) -> bool:
        return self.prices.lookup(self.model) is not None

    def complete(self, prompt: str, system: str | None = None,
                 cancel: threading.Event | None = None) -> Completion:
        """One answer, retrying 429/5xx/timeouts with exponential backoff. Raises ProviderError.

        Each attempt ends within `timeout_s` of wall clock, however slowly the server answers.
        Setting `cancel` ends the wait between retries; a request already sent finishes.
        Keys are redacted from the answer and from every error message.
        """
        try:
            return self._complete(prompt, system, cancel)
        except ProviderError as e:
            raise ProviderError(self.redact(str(e)), transient=e.transient) from None

    def _complete(self, prompt: str, system: str | None,
                  cancel: threading.Event | None) -> Completion:
        cancel = cancel or threading.Event()
        started = time.monotonic()
        attempt = 0
        while True:
            if cancel.is_set():
                raise ProviderError(f"{self.describe()}: cancelled")
            try:
                with self._slots:
                    reply = bounded(lambda: self._request(prompt, system), self.timeout_s)
            except TransientError as e:
                if attempt == self.retries:
                    raise ProviderError(f"{self.describe()}: {e} (gave up after {attempt + 1} "
                                        "attempts; resume later)", transient=True) from None
                delay = self.backoff_s * 2 ** attempt * (1 + 0.25 * random.random())
                if e.retry_after is not None:
                    delay = max(delay, e.retry_after)
                if cancel.wait(min(delay, self.max_backoff_s)):
                    raise ProviderError(f"{self.describe()}: cancelled") from None
                attempt += 1
                continue
            text = self.redact(reply.text or "")
            tokens_in, tokens_out = reply.tokens_in, reply.tokens_out
            estimated = tokens_in is None or tokens_out is None
            if tokens_in is None:
                tokens_in = estimate_tokens(prompt) + estimate_tokens(system)
            if tokens_out is None:
                tokens_out = estimate_tokens(reply.text)
            cost = self.prices.cost(self.model, tokens_in, tokens_out)
            return Completion(text=text, tokens_in=tokens_in, tokens_out=tokens_out,
                              tokens_reasoning=reply.tokens_reasoning,
                              latency_s=time.monotonic() - started, cost_usd=cost,
                              attempts=attempt + 1, provider=self.name, model=self.model,
                              tokens_estimated=estimated)

    @abstractmethod
    def _request(self, prompt: str, system: str | None) -> Reply:
        """One attempt: a Reply, TransientError (worth retrying) or ProviderError (final)."""
