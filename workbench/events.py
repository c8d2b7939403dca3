"""What the search engine reports while it works, as plain dataclasses.

The engine calls `on_event(event)` from its own threads; a UI hands them to its event loop,
the headless runner prints them. Ids refer to rows in the store: read details from there.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RoundStarted:
    session_id: int
    round_id: int
    n: int


@dataclass
class IdeaAdded:
    idea_id: int


@dataclass
class ReviewNeeded:
    """Ideation finished with review on: these ideas wait for approve / edit / veto."""
    round_id: int
    idea_ids: list[int]


@dataclass
class KernelAdded:
    kernel_id: int


@dataclass
class EvaluationStarted:
    kernel_id: int


@dataclass
class VerdictReady:
    kernel_id: int
    status: str
    speedup_eager: float | None


@dataclass
class EvaluationsCancelled:
    """Verification stopped (Ctrl-C, cancel, quit) before these kernels got a verdict: none is
    stored, and the session verifies them again when it resumes."""
    kernel_ids: list[int]


@dataclass
class LLMCallDone:
    call_id: int
    purpose: str                 # ideate | implement | repair
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    error: str | None
    estimated: bool = False      # no usage reported: tokens (and cost) estimated from text


@dataclass
class Progress:
    text: str


@dataclass
class SessionStopped:
    session_id: int
    reason: str                  # finished | budget: ... | cancelled | a one-line error


Event = (RoundStarted | IdeaAdded | ReviewNeeded | KernelAdded | EvaluationStarted | VerdictReady
         | EvaluationsCancelled | LLMCallDone | Progress | SessionStopped)
