"""The session as a pipeline: every piece of work starts as soon as what it needs is stored.

Engine.step() works phase by phase (all ideation, then all implementations with their repair
chains), which leaves the model idle while the slowest chain of a round finishes. Flow.run()
instead keeps the model and the verifier busy: an idea is implemented as soon as its ideation is
stored, a kernel verified as soon as it is written, a failure repaired as soon as its verdict is
in, and the next round's ideation starts as soon as its seeds are settled (every first
implementation of the round has a verdict), while the round's repairs still run. What to start
is read from the store each time anything finishes, so a stopped flow resumes like the engine.
"""
from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Callable

from workbench.llm.prompts import PromptError
from workbench.search import policy, queries
from workbench.search.settings import Stop

if TYPE_CHECKING:
    from workbench.search.engine import Engine

_POLL_S = 0.5     # how often limits (wall clock) are checked while everything waits


class Flow:
    """One run of the pipeline over an engine; `run()` returns when nothing more can start."""

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.inflight: dict[Future, tuple] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        e = self.engine
        with ThreadPoolExecutor(max_workers=64, thread_name_prefix="flow") as pool:
            self.pool = pool
            while True:
                if not e.control.cancel.is_set() and self.error is None \
                        and not e.check_limits():
                    self._start_work()
                if not self.inflight:
                    break
                done, _ = wait(list(self.inflight), timeout=_POLL_S,
                               return_when=FIRST_COMPLETED)
                for future in done:
                    self._collect(future)
        if self.error is not None:
            raise self.error
        if e.control.reason:   # a budget, an API failure, a cancel, the roofline goal
            raise Stop(e.control.reason)

    # -- starting work -------------------------------------------------------------------------
    def _start_work(self) -> None:
        e = self.engine
        s, store, sid = e.settings, e.store, e.session_id
        for kid in queries.unevaluated_kernels(store, sid):
            self._submit(("evaluate", kid), lambda k=kid: e._evaluate([k]))
        for kid in policy.repairable(store, sid, s):
            self._submit(("repair", kid), lambda k=kid: e._repair_one(k))
        for kid in policy.refinable(store, sid, s):
            self._submit(("refine", kid), lambda k=kid: e._refine_call(k))
        for idea, missing in policy.implementable(store, sid, s):
            running = sum(1 for key in self.inflight.values()
                          if key[0] == "implement" and key[1] == idea["id"])
            for j in range(missing - running):
                slot = s.impls - missing + running + j
                self._submit(("implement", idea["id"], slot),
                             lambda i=idea, n=slot: e._implement_call(i, n))
        latest = queries.latest_round(store, sid)
        pair = latest and not self._busy("combine") and \
            policy.combine_pair(store, sid, s, latest)
        if pair:
            self._submit(("combine", latest["id"]),
                         lambda: e._combine(latest["id"], *pair))
        if self._busy("ideate"):
            return
        if latest is not None and policy.seeds_to_ideate(store, latest):
            seed = policy.seeds_to_ideate(store, latest)[0]   # one at a time: see the others
            self._submit(("ideate", latest["id"], seed), lambda: self._ideate(latest["id"], seed))
        elif self._may_start_round(latest):
            self._submit(("ideate", "start"), lambda: e._start_round(latest))

    def _ideate(self, round_id: int, seed: int | None) -> None:
        self.engine._ideate_seed(round_id, seed)
        self.engine._ideation_done(round_id)

    def _may_start_round(self, latest: dict | None) -> bool:
        """Round n+1 may start when round n's seeds are settled: ideas ideated and reviewed,
        every implementation written and verified (repairs may still run)."""
        e = self.engine
        if latest is None:
            return True
        if latest["n"] + 1 >= e.settings.rounds:
            return False
        if policy.pending_review(e.store, e.session_id, e.settings):
            return False
        if any(key[0] in ("implement", "evaluate", "combine", "refine")
               for key in self.inflight.values()):
            return False
        return not (policy.implementable(e.store, e.session_id, e.settings)
                    or queries.unevaluated_kernels(e.store, e.session_id)
                    or policy.combine_pair(e.store, e.session_id, e.settings, latest)
                    or policy.refinable(e.store, e.session_id, e.settings))

    def _busy(self, kind: str) -> bool:
        return any(key[0] == kind for key in self.inflight.values())

    def _submit(self, key: tuple, fn: Callable[[], object]) -> None:
        if key in self.inflight.values():
            return
        self.inflight[self.pool.submit(fn)] = key

    # -- finishing work ------------------------------------------------------------------------
    def _collect(self, future: Future) -> None:
        key = self.inflight.pop(future)
        try:
            future.result()
        except (Stop, PromptError) as err:
            self.engine.control.fail_soon(str(err))
        except BaseException as err:  # noqa: BLE001 - re-raised once the others finished
            self.error = self.error or err    # as a crash: no clean stop recorded
        if key[0] == "implement":
            self.engine._mark_implemented(None)
