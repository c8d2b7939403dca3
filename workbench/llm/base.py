"""What every provider shares: retries with backoff, a concurrency limit, tokens and cost."""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from workbench.llm.errors import ProviderError, TransientError
from workbench.llm.prices import PriceTable


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


@dataclass
class Reply:
    """One successful HTTP answer, as a provider subclass reads it."""
    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_reasoning: int | None = None


def redact_url(url: str | None) -> str | None:
    """A base URL without user:password, so it can be stored and shown."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


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

        Setting `cancel` ends the wait between retries; a request already sent finishes.
        """
        cancel = cancel or threading.Event()
        started = time.monotonic()
        attempt = 0
        while True:
            if cancel.is_set():
                raise ProviderError(f"{self.describe()}: cancelled")
            try:
                with self._slots:
                    reply = self._request(prompt, system)
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
            cost = self.prices.cost(self.model, reply.tokens_in, reply.tokens_out)
            return Completion(text=reply.text or "", tokens_in=reply.tokens_in,
                              tokens_out=reply.tokens_out, tokens_reasoning=reply.tokens_reasoning,
                              latency_s=time.monotonic() - started, cost_usd=cost,
                              attempts=attempt + 1, provider=self.name, model=self.model)

    @abstractmethod
    def _request(self, prompt: str, system: str | None) -> Reply:
        """One attempt: a Reply, TransientError (worth retrying) or ProviderError (final)."""
