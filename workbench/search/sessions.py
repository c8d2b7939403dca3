"""Creating, resuming and summarising sessions: what the CLI and the app call around the engine."""
from __future__ import annotations

import json
from typing import Any

from workbench.llm.base import redact_url
from workbench.problems import Problem
from workbench.search import queries
from workbench.search.settings import SearchError, SearchSettings
from workbench.store import Store


def new_session(store: Store, problem: Problem, provider_name: str | None, model: str | None,
                base_url: str | None, settings: SearchSettings,
                provider_options: dict | None = None) -> int:
    """Record a problem and a new session for it; returns the session id."""
    problem_id = store.upsert_problem(problem)
    data = {**settings.to_dict(), "provider_options": provider_options or {}}
    return store.create_session(problem_id, provider_name, model, data,
                                base_url=redact_url(base_url))


def resume_session(store: Store, session_id: int, **overrides: Any) -> None:
    """Mark a stopped session running again, with settings overrides (e.g. a larger budget)."""
    found = queries.session_row(store, session_id)
    if not found:
        raise SearchError(f"no session {session_id}")
    data = json.loads(found["settings"] or "{}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    store.update("sessions", session_id, status="running", stop_reason=None, ended_at=None,
                 settings=data)


def problem_of(store: Store, session_id: int) -> Problem:
    row = store.get("problems", store.get("sessions", session_id)["problem_id"])
    return Problem(name=row["name"], path=row["path"], source=row["source"], hash=row["hash"],
                   family=row["family"], dtype=row["dtype"] or "float32", atol=row["atol"],
                   rtol=row["rtol"], flops=row["flops"], min_bytes=row["min_bytes"] or 0)


def best_kernel(store: Store, session_id: int) -> dict | None:
    """The session's best kernel (Store.best_kernel: one definition everywhere), or None."""
    return store.best_kernel(session_id)
