"""The CRFM search loop: rounds of seeds → ideas → implementations → verdicts → next seeds.

Everything the engine decides it derives from the store, so a session stopped at any point
(Ctrl-C, kill -9, budget, a human's stop) resumes where it was: a round whose seeds are not all
ideated → ideate them; approved ideas short of M implementations → implement; kernels without
an evaluation → evaluate; failures with repair attempts left → repair; else the next round.
Human decisions (workbench.control) are store rows the engine reads at each step.
"""
from __future__ import annotations

import json
import threading
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from workbench import events
from workbench.gpu.executor import EvalSettings, Executor
from workbench.gpu.verdict import empty as empty_verdict
from workbench.gpu.verifier import record, request_for
from workbench.llm.base import Completion, Provider, redact_url
from workbench.llm.errors import ProviderError
from workbench.llm.factory import NO_PROVIDER
from workbench.llm.parse import KINDS, extract_code, parse_ideas
from workbench.llm.prompts import PromptError, Prompts
from workbench.problems import Problem
from workbench.store import Store, now

REPAIRABLE = ("compile_error", "incorrect", "crashed", "timeout", "flagged")
# An LLM call consumed its slot unless the API failed (then resuming asks again).
_CONSUMED = "(error_kind is null or error_kind != 'api')"


class SearchError(Exception):
    """A session that cannot start or continue; str() is one line."""


class _Stop(Exception):
    """Stop the session after the work in hand (budget, API failure, cancel)."""


@dataclass
class SearchSettings:
    rounds: int = 5               # R, as in the CRFM post
    ideas: int = 4                # N ideas per seed per round
    impls: int = 2                # M implementations per approved idea
    top_k: int = 4                # k best kernels seed the next round
    repairs: int = 1              # repair attempts per failed implementation
    review: bool = False          # ideas wait for a human before implementation
    budget_usd: float | None = None
    budget_tokens: int | None = None
    history_limit: int = 40       # past ideas shown to ideation
    eval: EvalSettings = field(default_factory=EvalSettings)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SearchSettings":
        known = {f.name for f in fields(cls)} - {"eval"}
        eval_known = {f.name for f in fields(EvalSettings)}
        return cls(**{k: v for k, v in data.items() if k in known},
                   eval=EvalSettings(**{k: v for k, v in (data.get("eval") or {}).items()
                                        if k in eval_known}))


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
    found = store.rows("sessions", "id = ?", [session_id])
    if not found:
        raise SearchError(f"no session {session_id}")
    data = json.loads(found[0]["settings"] or "{}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    store.update("sessions", session_id, status="running", stop_reason=None, ended_at=None,
                 settings=data)


def problem_of(store: Store, session_id: int) -> Problem:
    row = store.get("problems", store.get("sessions", session_id)["problem_id"])
    return Problem(name=row["name"], path=row["path"], source=row["source"], hash=row["hash"],
                   family=row["family"], dtype=row["dtype"] or "float32", atol=row["atol"],
                   rtol=row["rtol"], flops=row["flops"], min_bytes=row["min_bytes"] or 0)


def _eligible_sql(no_gpu: bool) -> str:
    statuses = "'correct', 'unverified'" if no_gpu else "'correct'"
    return f"(e.status in ({statuses}) or (e.status = 'flagged' and k.cleared = 1))"


_LATEST = ("left join evaluations e on e.id = "
           "(select max(id) from evaluations where kernel_id = k.id)")


def session_table(store: Store, session_id: int) -> list[dict]:
    """One row per kernel: round, idea, kernel, status, time_ms, speedup_eager."""
    return list(store.db.query(
        "select r.n as round, k.idea_id as idea, k.id as kernel, k.origin, k.attempt, "
        "k.pruned, coalesce(e.status, 'pending') as status, e.time_ms, e.speedup_eager, "
        "e.error from kernels k left join ideas i on i.id = k.idea_id "
        f"left join rounds r on r.id = i.round_id {_LATEST} where k.session_id = ? "
        "order by k.id", [session_id]))


def best_kernel(store: Store, session_id: int) -> dict | None:
    """The fastest kernel that may seed (correct, or flagged and cleared), or None."""
    no_gpu = SearchSettings.from_dict(store.settings(session_id)).eval.no_gpu
    return next(store.db.query(
        f"select k.id, e.status, e.time_ms, e.speedup_eager from kernels k {_LATEST} "
        f"where k.session_id = ? and k.pruned = 0 and {_eligible_sql(no_gpu)} "
        "order by e.time_ms is null, e.time_ms, k.id desc limit 1", [session_id]), None)


def spent(store: Store, session_id: int) -> tuple[int, float]:
    """Tokens (input + output) and dollars this session's LLM calls have used."""
    row = store.db.execute(
        "select coalesce(sum(coalesce(tokens_in, 0) + coalesce(tokens_out, 0)), 0), "
        "coalesce(sum(cost_usd), 0) from llm_calls where session_id = ?", [session_id]).fetchone()
    return int(row[0]), float(row[1])


class Engine:
    """Drives one session. Thread-safe to `cancel()` from anywhere; `run()` from one thread."""

    def __init__(self, store: Store, session_id: int, provider: Provider | None,
                 executor: Executor, on_event: Callable[[object], None] | None = None,
                 prompts: Prompts | None = None):
        found = store.rows("sessions", "id = ?", [session_id])
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
        self.problem_id = found[0]["problem_id"]
        if self.settings.budget_usd is not None and provider and not provider.has_price():
            raise SearchError(f"no price for model {provider.model!r}, so a dollar budget cannot "
                              "be kept: add it to the price file (--prices) or use "
                              "--budget-tokens")
        self._cancel = threading.Event()
        self._stop_reason: str | None = None
        self._lock = threading.Lock()
        self._futures: dict[int, Future] = {}
        self._calls_in_flight = 0
        self._active = 0              # public pieces of work running now
        # Budget check and call share one slot and the running totals count each answer before
        # the slot is released, so concurrent calls overshoot a budget by at most `concurrency`.
        self._slots = threading.Semaphore(provider.concurrency if provider else 1)
        self._spent_tokens, self._spent_usd = spent(store, session_id)

    # -- reading the store -------------------------------------------------------------------
    def _q(self, sql: str, params: list) -> list[dict]:
        return list(self.store.db.query(sql, params))

    def _latest_round(self) -> dict | None:
        found = self._q("select * from rounds where session_id = ? order by n desc limit 1",
                        [self.session_id])
        return found[0] if found else None

    def _seeds_to_ideate(self, round_row: dict) -> list[int | None]:
        seeds = json.loads(round_row["seeds"] or "[]")
        done = {r["kernel_id"] for r in self._q(
            f"select kernel_id from llm_calls where round_id = ? and purpose = 'ideate' "
            f"and {_CONSUMED}", [round_row["id"]])}
        return [s for s in seeds if s not in done]

    def pending_review(self) -> list[int]:
        """Ideas waiting for approve / edit / veto (only while review is on)."""
        if not self.settings.review:
            return []
        return [r["id"] for r in self._q(
            "select i.id from ideas i join rounds r on r.id = i.round_id "
            "where r.session_id = ? and i.status = 'proposed' order by i.id", [self.session_id])]

    def _unevaluated(self) -> list[int]:
        return [r["id"] for r in self._q(
            "select k.id from kernels k where k.session_id = ? and k.pruned = 0 and not exists "
            "(select 1 from evaluations e where e.kernel_id = k.id) order by k.id",
            [self.session_id])]

    def _repairable(self) -> list[int]:
        if self.settings.repairs <= 0:
            return []
        return [r["id"] for r in self._q(
            f"select k.id from kernels k {_LATEST} left join ideas i on i.id = k.idea_id "
            "where k.session_id = ? and k.pruned = 0 and k.origin in ('llm', 'repair') "
            "and k.attempt < ? and coalesce(i.status, '') != 'vetoed' "
            f"and e.status in ({', '.join(repr(s) for s in REPAIRABLE)}) "
            "and not (e.status = 'flagged' and k.cleared = 1) and not exists (select 1 from "
            f"llm_calls c where c.kernel_id = k.id and c.purpose = 'repair' and {_CONSUMED}) "
            "order by k.id", [self.session_id, self.settings.repairs])]

    def _implementable(self) -> list[tuple[dict, int]]:
        """(idea, implementations still to write) for approved ideas short of M."""
        statuses = "('approved', 'edited')" if self.settings.review else \
            "('approved', 'edited', 'proposed')"
        rows = self._q(
            "select i.*, (select count(*) from llm_calls c where c.idea_id = i.id and "
            f"c.purpose = 'implement' and {_CONSUMED}) as done from ideas i "
            "join rounds r on r.id = i.round_id left join kernels s on s.id = i.seed_kernel_id "
            f"where r.session_id = ? and i.status in {statuses} and coalesce(s.pruned, 0) = 0 "
            "order by i.id", [self.session_id])
        return [(row, self.settings.impls - row["done"]) for row in rows
                if row["done"] < self.settings.impls]

    def next_action(self) -> str:
        """ideate | review | evaluate | repair | implement | done | stopped | finished."""
        status = self.store.get("sessions", self.session_id)["status"]
        if status in ("stopped", "finished"):
            return status
        latest = self._latest_round()
        if latest and self._seeds_to_ideate(latest):
            return "ideate"
        if self.pending_review():
            return "review"
        if self._unevaluated():
            return "evaluate"
        if self._repairable():
            return "repair"
        if self._implementable():
            return "implement"
        if latest is None or latest["n"] + 1 < self.settings.rounds:
            return "ideate"
        return "done"

    # -- driving ---------------------------------------------------------------------------------
    def step(self) -> bool:
        """Do the next piece of work; False when finished, stopped or waiting for review."""
        if not self._begin():
            return False
        action = self.next_action()
        if action in ("stopped", "finished"):
            return False
        if action == "done":
            self._finish()
            return False
        if action == "review":
            latest = self._latest_round()
            self._emit(events.ReviewNeeded(latest["id"] if latest else 0, self.pending_review()))
            return False
        work = {"ideate": self._ideate, "implement": self._implement,
                "evaluate": lambda: self._evaluate(self._unevaluated()),
                "repair": lambda: self._repair(self._repairable())}[action]
        self._work(work, None)
        return self.store.get("sessions", self.session_id)["status"] == "running"

    # The public pieces: each stops the session cleanly (one-line reason) instead of raising.
    def ideate(self) -> int | None:
        """Ideate for the latest round's remaining seeds, or start the next round: its id
        (None when the session is stopped; SessionStopped says why)."""
        return self._work(self._ideate, None)

    def implement(self, round_id: int | None = None) -> list[int]:
        """Write the missing implementations of approved ideas (of one round, or all), verify
        each as soon as it is written, and repair failures within the repair budget."""
        return self._work(lambda: self._implement(round_id), [])

    def evaluate(self, kernel_ids: list[int]) -> list[dict]:
        """Verify kernels through the executor and store each verdict as it arrives."""
        return self._work(lambda: self._evaluate(kernel_ids), [])

    def repair(self, kernel_ids: list[int]) -> list[int]:
        """Ask for fixes of failed kernels (one attempt each, then verify; chains continue)."""
        return self._work(lambda: self._repair(kernel_ids), [])

    def _begin(self) -> bool:
        """May work start? Not on a stopped or finished session. A session resumed since this
        engine last stopped runs again, with its settings re-read (e.g. a larger budget)."""
        with self._lock:
            if self.store.get("sessions", self.session_id)["status"] != "running":
                return False
            if self._active == 0:
                self._cancel.clear()
                self._stop_reason = None
                self.settings = SearchSettings.from_dict(self.store.settings(self.session_id))
            return True

    def _work(self, fn: Callable[[], Any], default: Any) -> Any:
        if not self._begin():
            return default
        with self._lock:
            self._active += 1
        try:
            return fn()
        except (_Stop, PromptError) as e:
            self._stop(str(e))
            return default
        finally:
            with self._lock:
                self._active -= 1
            if self._cancel.is_set():
                self._stop(self._stop_reason or "cancelled")

    def run(self, review: Callable[[list[int]], None] | None = None) -> str:
        """Step until finished or stopped; `review(idea_ids)` decides pending ideas when given.

        Returns the final next_action(): finished, stopped, or review (ideas still waiting).
        """
        while True:
            if self.step():
                continue
            action = self.next_action()
            if action == "review" and review is not None and not self._cancel.is_set():
                review(self.pending_review())
                if self.pending_review():
                    return "review"
                continue
            return action

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop soon, from any thread: the session is marked stopped now, no new LLM calls or
        evaluations start, queued evaluations are cancelled; calls in flight still get stored."""
        with self._lock:
            self._stop_reason = self._stop_reason or reason
            reason = self._stop_reason
        self._stop(reason)
        with self._lock:
            self._cancel.set()
            futures = list(self._futures.values())
        for future in futures:
            future.cancel()

    def _stop(self, reason: str) -> None:
        with self._lock:
            if self.store.get("sessions", self.session_id)["status"] in ("stopped", "finished"):
                return
            self.store.update("sessions", self.session_id, status="stopped", stop_reason=reason,
                              ended_at=now())
        self._emit(events.SessionStopped(self.session_id, reason))

    def _finish(self) -> None:
        with self.store.transaction():
            self.store.db.execute("update rounds set status = 'done', ended_at = ? where "
                                  "session_id = ? and status != 'done'", [now(), self.session_id])
            self.store.update("sessions", self.session_id, status="finished",
                              stop_reason="finished", ended_at=now())
        self._emit(events.SessionStopped(self.session_id, "finished"))

    def _emit(self, event: object) -> None:
        self.on_event(event)

    def _fail_soon(self, reason: str) -> None:
        """A worker hit a reason to stop: let the others finish what they hold, start nothing."""
        with self._lock:
            self._stop_reason = self._stop_reason or reason
        self._cancel.set()

    # -- LLM calls ---------------------------------------------------------------------------------
    def _check_budget(self) -> None:
        with self._lock:
            tokens, dollars = self._spent_tokens, self._spent_usd
        s = self.settings
        if s.budget_tokens is not None and tokens >= s.budget_tokens:
            raise _Stop(f"budget reached: {tokens:,} of {s.budget_tokens:,} tokens used "
                        f"(resume with a larger --budget-tokens)")
        if s.budget_usd is not None and dollars >= s.budget_usd:
            raise _Stop(f"budget reached: ${dollars:.2f} of ${s.budget_usd:.2f} spent "
                        f"(resume with a larger --budget-usd)")

    def _ask(self, purpose: str, prompt: str, round_id: int | None, idea_id: int | None = None,
             kernel_id: int | None = None) -> Completion:
        """One model call; an API failure is stored and stops the session (resume retries it)."""
        if self._cancel.is_set():
            raise _Stop(self._stop_reason or "cancelled")
        if self.provider is None:
            raise _Stop(NO_PROVIDER)
        with self._slots:
            return self._ask_in_slot(purpose, prompt, round_id, idea_id, kernel_id)

    def _ask_in_slot(self, purpose: str, prompt: str, round_id: int | None,
                     idea_id: int | None, kernel_id: int | None) -> Completion:
        if self._cancel.is_set():
            raise _Stop(self._stop_reason or "cancelled")
        self._check_budget()
        with self._lock:
            self._calls_in_flight += 1
            in_flight = self._calls_in_flight
        subject = f"idea {idea_id}" if idea_id else (f"kernel {kernel_id}" if kernel_id
                                                      else "the reference")
        self._emit(events.Progress(f"{purpose} call for {subject} ({in_flight} in flight)"))
        try:
            completion = self.provider.complete(prompt, system=self.prompts.render("system"),
                                                cancel=self._cancel)
            with self._lock:
                self._spent_tokens += (completion.tokens_in or 0) + (completion.tokens_out or 0)
                self._spent_usd += completion.cost_usd or 0.0
            return completion
        except ProviderError as e:
            if self._cancel.is_set():   # cancelled while waiting to retry: nothing to record
                raise _Stop(self._stop_reason or "cancelled") from None
            call_id = self._record_call(purpose, prompt, round_id, idea_id, kernel_id, None,
                                        str(e), "api")
            self._emit(events.LLMCallDone(call_id, purpose, None, None, None, str(e)))
            raise _Stop(str(e)) from None
        finally:
            with self._lock:
                self._calls_in_flight -= 1

    def _record_call(self, purpose: str, prompt: str, round_id: int | None, idea_id: int | None,
                     kernel_id: int | None, completion: Completion | None, error: str | None,
                     error_kind: str | None) -> int:
        c = completion
        return self.store.add_llm_call(
            session_id=self.session_id, round_id=round_id, provider=self.provider.name,
            model=self.provider.model, purpose=purpose, prompt=prompt,
            response=c.text if c else None, tokens_in=c.tokens_in if c else None,
            tokens_out=c.tokens_out if c else None,
            tokens_reasoning=c.tokens_reasoning if c else None,
            cost_usd=c.cost_usd if c else None, latency_s=c.latency_s if c else None,
            error=error, error_kind=error_kind, idea_id=idea_id, kernel_id=kernel_id)

    def _call_done(self, call_id: int, purpose: str, c: Completion, error: str | None) -> None:
        self._emit(events.LLMCallDone(call_id, purpose, c.tokens_in, c.tokens_out, c.cost_usd,
                                      error))

    # -- prompt pieces -------------------------------------------------------------------------
    def _seed_text(self, seed_id: int | None) -> str:
        if seed_id is None:
            ref = next(self.store.db.query(
                "select e.ref_eager_ms from evaluations e join kernels k on k.id = e.kernel_id "
                "where k.problem_id = ? and e.ref_eager_ms is not null order by e.id desc "
                "limit 1", [self.problem_id]), None)
            timing = (f" It runs in {ref['ref_eager_ms']:.4f} ms in PyTorch eager."
                      if ref else "")
            return f"The PyTorch reference above; no custom kernel yet.{timing}"
        kernel = self.store.get("kernels", seed_id)
        ev = self.store.latest_evaluation(seed_id)
        lines = [f"Kernel {seed_id}:", "", "```python", kernel["source"].rstrip(), "```", ""]
        if ev and ev["time_ms"] is not None:
            numbers = [f"{ev['time_ms']:.4f} ms"]
            if ev["speedup_eager"]:
                numbers.append(f"{ev['speedup_eager']:.2f}x vs PyTorch eager")
            if ev["speedup_compile"]:
                numbers.append(f"{ev['speedup_compile']:.2f}x vs torch.compile")
            if ev["floor_ms"]:
                numbers.append(f"{100 * ev['floor_ms'] / ev['time_ms']:.0f}% of the roofline "
                               f"floor's speed (floor {ev['floor_ms']:.4f} ms)")
            lines.append("Measured: " + ", ".join(numbers) + ".")
        elif ev:
            lines.append(f"Status: {ev['status']} (not timed).")
        return "\n".join(lines)

    def _history(self) -> tuple[str, str]:
        """Ideas tried in this session with their best outcome, and the kinds not tried yet."""
        rows = self._q(
            "select i.id, i.kind, i.text, i.status, (select e.status || '|' || "
            "coalesce(e.speedup_eager, '') from kernels k " + _LATEST + " where k.idea_id = i.id "
            "and e.id is not null order by e.status != 'correct', e.time_ms limit 1) as outcome "
            "from ideas i join rounds r on r.id = i.round_id where r.session_id = ? "
            "order by i.id", [self.session_id])
        tried = {r["kind"] for r in rows if r["kind"]}
        lines = []
        for r in rows[-self.settings.history_limit:]:
            if r["status"] == "vetoed":
                outcome = "vetoed by the user"
            elif r["outcome"]:
                status, speedup = r["outcome"].split("|")
                outcome = status + (f", {float(speedup):.2f}x vs eager" if speedup else "")
            else:
                outcome = "not implemented yet"
            lines.append(f"- [{r['kind'] or 'unknown'}] {r['text']} → {outcome}")
        untried = [k for k in KINDS if k not in tried]
        return ("\n".join(lines) or "None yet."), (", ".join(untried) or
                                                   "none left (all kinds tried: choose freely)")

    # -- the three pieces of work ------------------------------------------------------------------
    def _choose_seeds(self, n: int) -> list[int | None]:
        pinned = [r["id"] for r in self._q(
            "select id from kernels where problem_id = ? and pinned = 1 and pruned = 0 "
            "order by id", [self.problem_id])]
        if n == 0:
            best: list[int | None] = [None]
        else:
            best = [r["id"] for r in self._q(
                f"select k.id from kernels k {_LATEST} where k.session_id = ? and k.pruned = 0 "
                f"and {_eligible_sql(self.settings.eval.no_gpu)} "
                "order by e.time_ms is null, e.time_ms, k.id desc limit ?",
                [self.session_id, self.settings.top_k])] or [None]
        return best + [p for p in pinned if p not in best]

    def _ideate(self) -> int:
        latest = self._latest_round()
        if latest is None or not self._seeds_to_ideate(latest):
            n = 0 if latest is None else latest["n"] + 1
            seeds = self._choose_seeds(n)
            with self.store.transaction():
                if latest is not None:
                    self.store.update("rounds", latest["id"], status="done", ended_at=now())
                round_id = self.store.create_round(self.session_id, n)
                self.store.update("rounds", round_id, seeds=seeds)
            self._emit(events.RoundStarted(self.session_id, round_id, n))
            names = ", ".join("reference" if s is None else f"kernel {s}" for s in seeds)
            self._emit(events.Progress(f"round {n}: seeds {names}"))
            latest = self.store.get("rounds", round_id)
        round_id = latest["id"]
        self._parallel(self._ideate_seed, [(round_id, s) for s in self._seeds_to_ideate(latest)])
        if not self._seeds_to_ideate(self.store.get("rounds", round_id)):
            self.store.update("rounds", round_id, status="implementing")
            pending = self.pending_review()
            if pending:
                self._emit(events.ReviewNeeded(round_id, pending))
        return round_id

    def _ideate_seed(self, round_id: int, seed_id: int | None) -> None:
        history, untried = self._history()
        prompt = self.prompts.render(
            "ideate", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(), seed=self._seed_text(seed_id),
            history=history, untried_kinds=untried, n=self.settings.ideas,
            kinds="\n".join(f"- {k}: {d}" for k, d in KINDS.items()))
        completion = self._ask("ideate", prompt, round_id, kernel_id=seed_id)
        ideas = parse_ideas(completion.text, limit=self.settings.ideas)
        error = None if ideas else "no ideas found in the response"
        status = "proposed" if self.settings.review else "approved"
        with self.store.transaction():
            call_id = self._record_call("ideate", prompt, round_id, None, seed_id, completion,
                                        error, None if ideas else "no_ideas")
            idea_ids = [self.store.add_idea(round_id, idea.text, author="llm", kind=idea.kind,
                                            seed_kernel_id=seed_id, llm_call_id=call_id,
                                            status=status) for idea in ideas]
        self._call_done(call_id, "ideate", completion, error)
        for idea_id in idea_ids:
            self._emit(events.IdeaAdded(idea_id))

    def _implement(self, round_id: int | None = None) -> list[int]:
        jobs = [(idea, slot) for idea, missing in self._implementable()
                if round_id is None or idea["round_id"] == round_id
                for slot in range(missing)]
        results = self._parallel(self._implement_one, jobs)
        with self.store.transaction():
            for idea, missing in self._implementable_all(round_id):
                if missing <= 0 and idea["status"] in ("approved", "edited", "proposed"):
                    self.store.set_idea_status(idea["id"], "implemented")
        return [kid for chain in results for kid in chain]

    def _implementable_all(self, round_id: int | None) -> list[tuple[dict, int]]:
        rows = self._q(
            "select i.*, (select count(*) from llm_calls c where c.idea_id = i.id and "
            f"c.purpose = 'implement' and {_CONSUMED}) as done from ideas i join rounds r on "
            "r.id = i.round_id where r.session_id = ? and (? is null or i.round_id = ?)",
            [self.session_id, round_id, round_id])
        return [(row, self.settings.impls - row["done"]) for row in rows]

    def _implement_one(self, idea: dict, _slot: int) -> list[int]:
        prompt = self.prompts.render(
            "implement", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(), seed=self._seed_text(
                idea["seed_kernel_id"]), idea=idea["text"], kind=idea["kind"] or "unspecified",
            conventions=self._conventions())
        completion = self._ask("implement", prompt, idea["round_id"], idea_id=idea["id"])
        kernel_id = self._store_kernel("implement", prompt, completion, idea,
                                       parent_id=idea["seed_kernel_id"], attempt=0)
        return self._verify_and_repair(kernel_id) if kernel_id else []

    def _conventions(self) -> str:
        return self.prompts.render("conventions", dtype=self.problem.dtype).rstrip()

    def _store_kernel(self, purpose: str, prompt: str, completion: Completion, idea: dict | None,
                      parent_id: int | None, attempt: int,
                      repaired_id: int | None = None) -> int | None:
        """Store the call and the kernel it wrote together (or the call alone, as a failure)."""
        code = extract_code(completion.text)
        error = None if code else "no code defining ModelNew in the response"
        idea_id = idea["id"] if idea else None
        round_id = idea["round_id"] if idea else None
        with self.store.transaction():
            call_id = self._record_call(purpose, prompt, round_id,
                                        idea_id if purpose == "implement" else None,
                                        repaired_id, completion, error,
                                        None if code else "no_code")
            kernel_id = None
            if code:
                kernel_id = self.store.add_kernel(
                    self.problem_id, code, session_id=self.session_id, idea_id=idea_id,
                    parent_id=parent_id, origin="llm" if purpose == "implement" else "repair",
                    llm_call_id=call_id, attempt=attempt)
        self._call_done(call_id, purpose, completion, error)
        if kernel_id:
            self._emit(events.KernelAdded(kernel_id))
        return kernel_id

    def _verify_and_repair(self, kernel_id: int) -> list[int]:
        chain = [kernel_id]
        while True:
            verdict = self._evaluate([chain[-1]])[0]
            if verdict["status"] not in REPAIRABLE or chain[-1] not in self._repairable():
                return chain
            repaired = self._repair_one(chain[-1])
            if repaired is None:
                return chain
            chain.append(repaired)

    def _repair(self, kernel_ids: list[int]) -> list[int]:
        results = self._parallel(self._repair_chain, [(k,) for k in kernel_ids])
        return [kid for chain in results for kid in chain]

    def _repair_chain(self, kernel_id: int) -> list[int]:
        repaired = self._repair_one(kernel_id)
        return self._verify_and_repair(repaired) if repaired else []

    def _repair_one(self, kernel_id: int) -> int | None:
        kernel = self.store.get("kernels", kernel_id)
        idea = self.store.get("ideas", kernel["idea_id"]) if kernel["idea_id"] else None
        ev = self.store.latest_evaluation(kernel_id)
        detail = ev["error"] or ""
        flags = json.loads(ev["flags"] or "[]")
        detail += "".join(f"\nflag [{f.get('kind')}]: {f.get('reason')}" for f in flags)
        for trial in json.loads(ev["trial_errors"] or "[]"):
            if not trial.get("ok") and trial.get("reason"):
                detail += f"\ntrial {trial.get('trial')}: {trial['reason']}"
        prompt = self.prompts.render(
            "repair", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(),
            idea=idea["text"] if idea else "(a hand-edited kernel)",
            kind=(idea["kind"] if idea else None) or "unspecified", status=ev["status"],
            source=kernel["source"].rstrip(), error=detail.strip()[-4000:] or "(no message)",
            conventions=self._conventions())
        completion = self._ask("repair", prompt, idea["round_id"] if idea else None,
                               kernel_id=kernel_id)
        return self._store_kernel("repair", prompt, completion, idea, parent_id=kernel_id,
                                  attempt=kernel["attempt"] + 1, repaired_id=kernel_id)

    def _evaluate(self, kernel_ids: list[int]) -> list[dict]:
        submitted = []
        for kid in kernel_ids:
            if self._cancel.is_set():
                raise _Stop(self._stop_reason or "cancelled")
            source = self.store.get("kernels", kid)["source"]
            request = request_for(self.problem, source, self.settings.eval, label=f"kernel {kid}")
            try:
                future = self.executor.submit(request)
            except Exception as e:  # noqa: BLE001 - e.g. a pool shut down to stop quickly
                if self._cancel.is_set():
                    raise _Stop(self._stop_reason or "cancelled") from None
                raise _Stop(f"verifier unavailable: {type(e).__name__}: {e}") from None
            with self._lock:
                self._futures[kid] = future
            self._emit(events.EvaluationStarted(kid))
            submitted.append((kid, future))
        verdicts = []
        try:
            for kid, future in submitted:
                try:
                    verdict = future.result()
                except CancelledError:
                    raise _Stop(self._stop_reason or "cancelled") from None
                except Exception as e:  # noqa: BLE001 - the executor's failure, not the kernel's
                    if self._cancel.is_set():   # e.g. the pool was shut down to stop quickly
                        raise _Stop(self._stop_reason or "cancelled") from None
                    raise _Stop(f"verifier failed on kernel {kid}: {type(e).__name__}: {e}") \
                        from None
                verdict = {**empty_verdict(verdict.get("status", "crashed")), **verdict}
                record(self.store, kid, verdict)
                self._emit(events.VerdictReady(kid, verdict["status"],
                                               verdict.get("speedup_eager")))
                verdicts.append(verdict)
        finally:
            with self._lock:
                for kid, _ in submitted:
                    self._futures.pop(kid, None)
        return verdicts

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
                except (_Stop, PromptError) as e:
                    self._fail_soon(str(e))
        if self._stop_reason:
            raise _Stop(self._stop_reason)
        return results

