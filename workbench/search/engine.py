"""The CRFM search loop: rounds of seeds → ideas → implementations → verdicts → next seeds.

Everything the engine decides it derives from the store, so a session stopped at any point
(Ctrl-C, kill -9, budget, a human's stop) resumes where it was: a round whose seeds are not all
ideated → ideate them; approved ideas short of M implementations → implement; kernels without
an evaluation → evaluate; failures with repair attempts left → repair; else the next round.
Human decisions (workbench.control) are store rows the engine reads at each step.

This module is orchestration: the step/run loop, threads, cancel and stop. What to work on
next is policy.py; the pieces of work are pipelines.py; LLM calls are calls.py.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from workbench import events, session_lock
from workbench.gpu.executor import Executor
from workbench.llm.base import Provider
from workbench.llm.errors import ProviderError
from workbench.llm.prompts import PromptError, Prompts
from workbench.search import policy, queries
from workbench.search.calls import LLMCalls, ModelMix, RunControl
from workbench.search.combine import Combining
from workbench.search.flow import Flow
from workbench.search.judge import Judging
from workbench.search.models import build_roles
from workbench.search.pipelines import Pipelines
from workbench.search.refine import Refining
from workbench.search.sessions import problem_of
from workbench.search.settings import SearchError, SearchSettings, Stop, default_concurrency
from workbench.store import Store


class Engine(Pipelines, Refining, Combining, Judging):
    """Drives one session. Thread-safe to `cancel()` from anywhere; `run()` from one thread."""

    def __init__(self, store: Store, session_id: int, provider: Provider | None,
                 executor: Executor, on_event: Callable[[object], None] | None = None,
                 prompts: Prompts | None = None, roles: dict[str, ModelMix] | None = None):
        found = queries.session_row(store, session_id)
        if not found:
            raise SearchError(f"no session {session_id}")
        self.store = store
        self.session_id = session_id
        self.provider = provider
        self.executor = executor
        self.on_event = on_event or (lambda event: None)
        self.prompts = prompts or Prompts()
        self.settings = SearchSettings.from_dict(store.settings(session_id))
        self.problem = problem_of(store, session_id)
        self.problem_id = found["problem_id"]
        if roles is None and self.settings.models:
            try:
                same = {"timeout_s": provider.timeout_s, "retries": provider.retries,
                        "concurrency": provider.concurrency} if provider else \
                    {"concurrency": default_concurrency(self.settings)}
                roles = build_roles(self.settings.models,
                                    prices=provider.prices if provider else None, **same)
            except ProviderError as e:
                raise SearchError(str(e)) from None
        self.control = RunControl()
        self._lock = self.control.lock
        self._futures: dict[int, Future] = {}
        self._active = 0              # public pieces of work running now
        self.calls = LLMCalls(store, session_id, provider, self.prompts, self.control,
                              self._emit, lambda: self.settings, roles)
        unpriced = [p.model for p in self.calls.all_providers() if not p.has_price()]
        if self.settings.budget_usd is not None and unpriced:
            raise SearchError(f"no price for model {unpriced[0]!r}, so a dollar budget cannot "
                              "be kept: add it to the price file (--prices) or use "
                              "--budget-tokens")
        self._run_started = time.monotonic()
        self._gpu_s = queries.verifier_gpu_seconds(store, session_id)

    # -- what next -----------------------------------------------------------------------------
    def pending_review(self) -> list[int]:
        """Ideas waiting for approve / edit / veto (only while review is on)."""
        return policy.pending_review(self.store, self.session_id, self.settings)

    def next_action(self) -> str:
        """ideate | review | evaluate | repair | implement | done | stopped | finished."""
        return policy.next_action(self.store, self.session_id, self.settings)

    # -- driving ---------------------------------------------------------------------------------
    def step(self) -> bool:
        """Do the next piece of work; False when finished, stopped or waiting for review."""
        if not self._begin():
            return False
        if self.check_limits():
            return False
        action = self.next_action()
        if action in ("stopped", "finished"):
            return False
        if action == "done":
            self._finish()
            return False
        if action == "review":
            latest = queries.latest_round(self.store, self.session_id)
            self._emit(events.ReviewNeeded(latest["id"] if latest else 0, self.pending_review()))
            return False
        work = {"ideate": self._ideate, "implement": self._implement,
                "evaluate": lambda: self._evaluate(
                    queries.unevaluated_kernels(self.store, self.session_id)),
                "repair": lambda: self._repair(
                    policy.repairable(self.store, self.session_id, self.settings)),
                "combine": self._combine_due,
                "refine": lambda: self._refine(
                    policy.refinable(self.store, self.session_id, self.settings))}[action]
        self._work(work, None)
        return queries.session_status(self.store, self.session_id) == "running"

    # The public pieces: each stops the session cleanly (one-line reason) instead of raising.
    def ideate(self) -> int | None:
        """Ideate for the latest round's remaining seeds, or start the next round: its id
        (None when the session is stopped; SessionStopped says why)."""
        return self._work(self._ideate, None)

    def implement(self, round_id: int | None = None) -> list[int]:
        """Write the missing implementations of approved ideas (of one round, or all), verify
        each as soon as it is written, and repair failures within the repair budget."""
        return self._work(lambda: self._implement(round_id), [])

    def evaluate(self, kernel_ids: list[int], retime: bool = False) -> list[dict]:
        """Verify kernels through the executor and store each verdict as it arrives (a source
        verified before gets its verdict again, unless `retime`)."""
        return self._work(lambda: self._evaluate(kernel_ids, retime), [])

    def repair(self, kernel_ids: list[int]) -> list[int]:
        """Ask for fixes of failed kernels (one attempt each, then verify; chains continue)."""
        return self._work(lambda: self._repair(kernel_ids), [])

    def combine(self, first: int, second: int) -> list[int]:
        """Ask for one kernel merging the strengths of two kernels (the `combine` operator),
        in the latest round; verify it, repairing within the budget."""
        def work() -> list[int]:
            latest = queries.latest_round(self.store, self.session_id)
            if latest is None:
                raise Stop("combine needs a round: run the session first")
            kernel_id = self._combine(latest["id"], first, second)
            return self._verify_and_repair(kernel_id) if kernel_id else []
        return self._work(work, [])

    def run(self, review: Callable[[list[int]], None] | None = None) -> str:
        """Run the session as a pipeline (flow.py) until finished or stopped; `review(idea_ids)`
        decides pending ideas when given.

        Returns the final next_action(): finished, stopped, or review (ideas still waiting).
        """
        with self._driving():
            return self._run(review)

    def _run(self, review: Callable[[list[int]], None] | None) -> str:
        self._run_started = time.monotonic()
        while True:
            self._work(lambda: Flow(self).run(), None)
            action = self.next_action()
            if action == "review" and review is not None and not self.control.cancel.is_set():
                review(self.pending_review())
                if self.pending_review():
                    return "review"
                continue
            if action in ("stopped", "finished", "review"):
                return action
            if action == "done":
                self._finish()
                return "finished"
            if not self.step():   # work the flow could not start: the phase-wise way
                return self.next_action()

    def check_limits(self) -> bool:
        """Stop on a wall-clock or GPU-time budget, finish on the roofline goal: True then."""
        goal = policy.goal_reached(self.store, self.session_id, self.settings)
        if goal:
            self._finish(goal)
            self.control.fail_soon(goal)
            return True
        with self._lock:
            gpu_s = self._gpu_s
        limit = policy.limit_reached(self.settings, time.monotonic() - self._run_started, gpu_s)
        if limit:
            self.control.fail_soon(limit)
            self._stop(limit)
            return True
        return False

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop soon, from any thread: the session is marked stopped now, no new LLM calls or
        evaluations start, evaluations in hand are stopped without a verdict (verified again on
        resume); LLM calls in flight still get stored."""
        with self._lock:
            self.control.reason = self.control.reason or reason
            reason = self.control.reason
        self._stop(reason)
        with self._lock:
            self.control.cancel.set()
            futures = list(self._futures.values())
        self.executor.cancel(futures)

    # -- orchestration -----------------------------------------------------------------------------
    def _begin(self) -> bool:
        """May work start? Not on a stopped or finished session. A session resumed since this
        engine last stopped runs again, with its settings re-read (e.g. a larger budget)."""
        with self._lock:
            if queries.session_status(self.store, self.session_id) != "running":
                return False
            if self._active == 0:
                self.control.reset()
                self.settings = SearchSettings.from_dict(self.store.settings(self.session_id))
            return True

    @contextmanager
    def _driving(self) -> Iterator[None]:
        """Hold the session's lock while working: one driver per session, whichever process
        (another's `run --resume` or app is refused; SearchError, one line)."""
        try:
            held: Path = session_lock.acquire(self.store.path, self.session_id)
        except session_lock.SessionLocked as e:
            raise SearchError(str(e)) from None
        try:
            yield
        finally:
            session_lock.release(held)

    def _work(self, fn: Callable[[], Any], default: Any) -> Any:
        if not self._begin():
            return default
        with self._driving():
            with self._lock:
                self._active += 1
            try:
                return fn()
            except (Stop, PromptError) as e:
                self._stop(str(e))
                return default
            finally:
                with self._lock:
                    self._active -= 1
                if self.control.cancel.is_set():
                    self._stop(self.control.reason or "cancelled")

    def _parallel(self, fn: Callable, jobs: list[tuple]) -> list:
        """Run jobs on threads; a job that must stop the session lets the others finish."""
        if not jobs:
            return []
        results = []
        with ThreadPoolExecutor(max_workers=min(len(jobs), 32)) as pool:
            futures = [pool.submit(fn, *job) for job in jobs]
            for future in futures:
                try:
                    results.append(future.result())
                except (Stop, PromptError) as e:
                    self.control.fail_soon(str(e))
        if self.control.reason:
            raise Stop(self.control.reason)
        return results

    def _stop(self, reason: str) -> None:
        with self._lock:
            stopped = queries.stop_session(self.store, self.session_id, reason)
        if stopped:
            self._emit(events.SessionStopped(self.session_id, reason))

    def _finish(self, reason: str = "finished") -> None:
        queries.finish_session(self.store, self.session_id, reason)
        self._emit(events.SessionStopped(self.session_id, reason))

    def _count_gpu(self, verdict: dict) -> None:
        with self._lock:
            self._gpu_s += queries.gpu_seconds(verdict)

    def _emit(self, event: object) -> None:
        self.on_event(event)
