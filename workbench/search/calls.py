"""LLM-call bookkeeping: concurrency slots, the budget, and a stored row for every call."""
from __future__ import annotations

import threading
from typing import Callable

from workbench import events
from workbench.llm.base import Completion, Provider
from workbench.llm.errors import ProviderError
from workbench.llm.factory import NO_PROVIDER
from workbench.llm.prompts import Prompts
from workbench.search import policy, queries
from workbench.search.settings import SearchSettings, Stop
from workbench.store import Store


class RunControl:
    """The cancel flag and the first reason to stop, shared by the engine's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.reason: str | None = None

    def check(self) -> None:
        """Raise Stop when the session is being stopped."""
        if self.cancel.is_set():
            raise Stop(self.reason or "cancelled")

    def stop(self) -> Stop:
        return Stop(self.reason or "cancelled")

    def fail_soon(self, reason: str) -> None:
        """A worker hit a reason to stop: let the others finish what they hold, start nothing."""
        with self.lock:
            self.reason = self.reason or reason
        self.cancel.set()

    def reset(self) -> None:
        self.cancel.clear()
        self.reason = None


class ModelMix:
    """Several models serving one role, picked by weight (smooth weighted round-robin: a 2:1
    mix answers A, B, A, A, B, A..., deterministic, so a resumed session continues the mix)."""

    def __init__(self, members: list[tuple[Provider, float]]):
        self.members = [(p, float(w)) for p, w in members if w > 0]
        if not self.members:
            raise ValueError("a model mix needs a member with a positive weight")
        self._current = [0.0] * len(self.members)
        self._lock = threading.Lock()

    def pick(self) -> Provider:
        with self._lock:
            total = sum(w for _, w in self.members)
            for i, (_, weight) in enumerate(self.members):
                self._current[i] += weight
            best = max(range(len(self.members)), key=lambda i: self._current[i])
            self._current[best] -= total
            return self.members[best][0]

    def providers(self) -> list[Provider]:
        return [p for p, _ in self.members]


class LLMCalls:
    """Asks the role's model within the session's slots and budget; stores each call with the
    provider and model that answered it."""

    def __init__(self, store: Store, session_id: int, provider: Provider | None,
                 prompts: Prompts, control: RunControl, emit: Callable[[object], None],
                 settings: Callable[[], SearchSettings],
                 roles: dict[str, ModelMix] | None = None):
        self.store = store
        self.session_id = session_id
        self.provider = provider
        self.roles = roles or {}
        self.prompts = prompts
        self.control = control
        self.emit = emit
        self.settings = settings
        self.in_flight = 0
        # Budget check and call share one slot and the running totals count each answer before
        # the slot is released, so concurrent calls overshoot a budget by at most `concurrency`.
        slots = max([provider.concurrency if provider else 1] +
                    [p.concurrency for mix in self.roles.values() for p in mix.providers()])
        self._slots = threading.Semaphore(slots)
        self._spent_tokens, self._spent_usd = queries.spent(store, session_id)

    def all_providers(self) -> list[Provider]:
        found = [self.provider] if self.provider else []
        return found + [p for mix in self.roles.values() for p in mix.providers()
                        if p not in found]

    def provider_for(self, purpose: str) -> Provider | None:
        """The model for a purpose: the role's (combine falls back to implement's, refine to
        repair's), else the session's default."""
        for role in (purpose, {"combine": "implement", "refine": "repair"}.get(purpose)):
            if role in self.roles:
                return self.roles[role].pick()
        return self.provider

    def ask(self, purpose: str, prompt: str, round_id: int | None, idea_id: int | None = None,
            kernel_id: int | None = None) -> Completion:
        """One model call; an API failure is stored and stops the session (resume retries it)."""
        self.control.check()
        provider = self.provider_for(purpose)
        if provider is None:
            raise Stop(NO_PROVIDER)
        with self._slots:
            return self._ask_in_slot(provider, purpose, prompt, round_id, idea_id, kernel_id)

    def _ask_in_slot(self, provider: Provider, purpose: str, prompt: str, round_id: int | None,
                     idea_id: int | None, kernel_id: int | None) -> Completion:
        self.control.check()
        with self.control.lock:
            tokens, dollars = self._spent_tokens, self._spent_usd
        policy.check_budget(self.settings(), tokens, dollars)
        with self.control.lock:
            self.in_flight += 1
            in_flight = self.in_flight
        subject = f"idea {idea_id}" if idea_id else (f"kernel {kernel_id}" if kernel_id
                                                      else "the reference")
        self.emit(events.Progress(f"{purpose} call for {subject} to {provider.model} "
                                  f"({in_flight} in flight)"))
        try:
            completion = provider.complete(prompt, system=self.prompts.render("system"),
                                                cancel=self.control.cancel)
            with self.control.lock:
                self._spent_tokens += (completion.tokens_in or 0) + (completion.tokens_out or 0)
                self._spent_usd += completion.cost_usd or 0.0
            return completion
        except ProviderError as e:
            if self.control.cancel.is_set():   # cancelled while waiting to retry: nothing to record
                raise self.control.stop() from None
            call_id = self.record(purpose, prompt, round_id, idea_id, kernel_id, None,
                                  str(e), "api", provider=provider)
            self.emit(events.LLMCallDone(call_id, purpose, None, None, None, str(e)))
            raise Stop(str(e)) from None
        finally:
            with self.control.lock:
                self.in_flight -= 1

    def record(self, purpose: str, prompt: str, round_id: int | None, idea_id: int | None,
               kernel_id: int | None, completion: Completion | None, error: str | None,
               error_kind: str | None, evidence: dict | None = None,
               provider: Provider | None = None) -> int:
        """Store one call; `evidence` is what the prompt was given about its starting point,
        `provider` who was asked (when no completion says who answered)."""
        c = completion
        who = provider or self.provider
        name = (c.provider if c and c.provider else None) or (who.name if who else None)
        model = (c.model if c and c.model else None) or (who.model if who else None)
        redact = who.redact if who else (lambda text: text)   # no key is ever stored
        return self.store.add_llm_call(
            session_id=self.session_id, round_id=round_id, provider=name,
            model=model, purpose=purpose, prompt=redact(prompt),
            response=redact(c.text) if c else None, tokens_in=c.tokens_in if c else None,
            tokens_out=c.tokens_out if c else None,
            tokens_reasoning=c.tokens_reasoning if c else None,
            tokens_estimated=int(c.tokens_estimated) if c else None,
            cost_usd=c.cost_usd if c else None, latency_s=c.latency_s if c else None,
            error=redact(error), error_kind=error_kind, idea_id=idea_id, kernel_id=kernel_id,
            evidence=evidence)

    def done(self, call_id: int, purpose: str, c: Completion, error: str | None) -> None:
        self.emit(events.LLMCallDone(call_id, purpose, c.tokens_in, c.tokens_out, c.cost_usd,
                                     error, c.tokens_estimated))
