"""Runs the search engine off the UI thread and turns its events into Textual messages.

The engine calls `on_event` from its own threads; `post_message` is thread-safe, so each event
becomes an `EngineEvent` handled on the UI thread. Long calls (ideate, implement, evaluate) run
in thread workers; their outcome comes back as `WorkFinished`. Engines, providers and the
executor are built lazily, the first time a session needs them, so opening the app costs none.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message

from workbench.gpu.executor import Executor
from workbench.llm.errors import ProviderError
from workbench.store import Store


class EngineEvent(Message):
    """One workbench.events dataclass, delivered on the UI thread."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


class WorkFinished(Message):
    """A piece of background work ended; `error` is one line when it failed."""

    def __init__(self, label: str, error: str | None = None, result: Any = None,
                 session_id: int | None = None) -> None:
        super().__init__()
        self.label = label
        self.error = error
        self.result = result
        self.session_id = session_id  # the session whose engine did the work, if any


def one_line(error: BaseException) -> str:
    """Workbench errors are written as one line for people; others also say what they are."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    if type(error).__module__.startswith("workbench") and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def default_provider(session: dict):
    import json

    from workbench.llm import make_provider
    from workbench.search import SearchSettings, default_concurrency

    settings = json.loads(session.get("settings") or "{}")
    concurrency = (settings.get("provider_options") or {}).get("concurrency") or \
        default_concurrency(SearchSettings.from_dict(settings))
    return make_provider(session["provider"], session["model"], session.get("base_url"),
                         concurrency=concurrency)


def default_executor() -> Executor:
    from workbench.gpu.pool import LocalPool

    return LocalPool()


class EngineBridge:
    """One Engine per session, sharing one executor; all built on first use."""

    def __init__(self, store: Store, post: Callable[[Message], Any],
                 provider_factory: Callable[[dict], Any] | None = None,
                 executor_factory: Callable[[], Executor] | None = None) -> None:
        self.store = store
        self.post = post
        self.provider_factory = provider_factory or default_provider
        self.executor_factory = executor_factory or default_executor
        self._executor: Executor | None = None
        self._engines: dict[int, Any] = {}   # reused: engines with an LLM
        self._built: list[Any] = []          # every engine since the last cancel, LLM or not

    def engine(self, session_id: int, need_llm: bool = True):
        """The session's engine. Raises ProviderError or SearchError (one line) when it cannot
        be built; work that needs no LLM (compile + time) gets a provider-less engine then."""
        if session_id in self._engines:
            return self._engines[session_id]
        from workbench.search import Engine

        session = self.store.get("sessions", session_id)
        try:
            provider = self.provider_factory(session)
        except ProviderError:
            if need_llm:
                raise
            provider = None
        if self._executor is None:
            try:
                self._executor = self.executor_factory()
            except Exception as e:  # noqa: BLE001 - a broken GPU setup is one line, not a crash
                raise ProviderError(f"cannot start the GPU executor: {one_line(e)}") from None
        engine = Engine(self.store, session_id, provider, self._executor,
                        on_event=lambda event: self.post(EngineEvent(event)))
        if provider is not None:
            self._engines[session_id] = engine
        self._built.append(engine)
        return engine

    def cancel(self) -> None:
        """Cancel every engine (provider-less ones timing kernels too); a cancelled engine
        stays stopped, so the next job builds anew."""
        engines, self._engines, self._built = self._built, {}, []
        for engine in engines:
            engine.cancel()

    def shutdown(self) -> None:
        """Stop engines and kill the executor's child processes (at quit)."""
        self.cancel()
        if self._executor is not None:
            self._executor.shutdown(cancel=True)
            self._executor = None
