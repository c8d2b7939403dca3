"""The main screen's engine work: keys that ask the search engine for work (in thread
workers), and the engine's events shown as they land. A mixin of MainScreen."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workbench import events
from workbench.llm.errors import ProviderError
from workbench.search import SearchError, SearchSettings, resume_session
from workbench.search import policy
from workbench.search.queries import finish_session
from workbench.store import StoreError
from workbench.tui import queries


class EngineActions:
    # -- engine events -------------------------------------------------------------------------
    def apply_event(self, event: Any) -> None:
        """An engine event, on the UI thread: update only what is loaded or visible."""
        tree = self.kernel_tree
        if isinstance(event, events.RoundStarted):
            tree.sync("session", event.session_id)
            node = tree.node_for("round", event.round_id)
            if node is not None:
                node.expand()  # results appear as they land
            self.refresh_plot(event.session_id, force=True)
        elif isinstance(event, (events.IdeaAdded, events.ReviewNeeded)):
            round_id = (event.round_id if isinstance(event, events.ReviewNeeded)
                        else (queries.idea(self.store, event.idea_id) or {}).get("round_id"))
            if round_id is not None:
                tree.sync("round", round_id)
            if isinstance(event, events.ReviewNeeded):
                self.notify(f"{len(event.idea_ids)} ideas wait for review: a approves, "
                            "e edits, v vetoes, m implements", timeout=8)
        elif isinstance(event, events.KernelAdded):
            tree.add_kernel(event.kernel_id)
        elif isinstance(event, events.EvaluationStarted):
            self.in_flight.add(event.kernel_id)
            tree.relabel_kernel(event.kernel_id)
        elif isinstance(event, events.VerdictReady):
            self.in_flight.discard(event.kernel_id)
            row = queries.kernel(self.store, event.kernel_id)
            tree.relabel_kernel(event.kernel_id)
            if row is not None and row["session_id"] is not None:
                tree.refresh_best(row["session_id"])
                tree.sync("session", row["session_id"])  # round labels carry the best
                self.refresh_plot(row["session_id"], force=True)
        elif isinstance(event, events.EvaluationsCancelled):
            # Stopped on purpose: no verdict; R (or the next run) verifies them again.
            for kernel_id in event.kernel_ids:
                self.in_flight.discard(kernel_id)
                tree.relabel_kernel(kernel_id)
            self.progress = (f"{len(event.kernel_ids)} kernel(s) stopped without a verdict: "
                             "R verifies them")
        elif isinstance(event, events.LLMCallDone):
            if event.error:
                self.notify(f"LLM {event.purpose} call failed: {event.error}",
                            severity="error")
        elif isinstance(event, events.Progress):
            self.progress = event.text
        elif isinstance(event, events.SessionStopped):
            self.notify(f"session {event.session_id} stopped: {event.reason}")
            tree.sync("problem", (queries.session(self.store, event.session_id)
                                  or {}).get("problem_id", 0))
        if not isinstance(event, (events.Progress, events.LLMCallDone)):
            self.show_selection(source=False)
        self.update_status()
        self.refresh_bindings()

    def work_finished(self, session_id: int | None, label: str, error: str | None) -> None:
        if session_id is not None:
            self.busy.pop(session_id, None)
        if error:
            self.notify(f"{label}: {error}", severity="error", timeout=10)
        else:
            self.progress = f"{label}: done"
        if not self.busy:
            # Events cover what landed; in-flight marks of a cancelled run must not linger.
            stale = list(self.in_flight)
            self.in_flight.clear()
            for kernel_id in stale:
                self.kernel_tree.relabel_kernel(kernel_id)
        if session_id is not None:
            self.kernel_tree.sync_session(session_id)
        self.show_selection(source=False)
        self.update_status()
        self.refresh_bindings()

    # -- running engine work -------------------------------------------------------------------
    def run_engine(self, session_id: int | None, label: str, work: Callable[[Any], Any],
                   need_llm: bool = True, reopen: bool = False) -> None:
        """Run `work(engine)` in a thread worker; one job per session at a time. A stopped
        session is resumed first: asking it for work is asking it to continue. A finished one
        is only reopened for `reopen` work (compile and time), and finished again after."""
        if session_id is None:
            self.say("no session here: N starts one")
            return
        if session_id in self.busy:
            self.say(f"session {session_id} is busy: {self.busy[session_id]} (K cancels)")
            return
        status = queries.session(self.store, session_id)["status"]
        if status == "finished" and not reopen:
            self.say(f"session {session_id} has finished its rounds: n adds a round")
            return
        try:
            if status in ("stopped", "finished"):
                resume_session(self.store, session_id)
            engine = self.bridge.engine(session_id, need_llm=need_llm)
        except (ProviderError, SearchError, StoreError) as e:
            self.notify(str(e), severity="error", timeout=10)
            return
        if status == "finished":
            inner = work

            def work(engine: Any) -> Any:
                try:
                    return inner(engine)
                finally:
                    finish_session(self.store, session_id)

        self.busy[session_id] = label
        self._busy_since[session_id] = time.monotonic()
        self.update_status()
        self.refresh_bindings()
        self.app.run_in_thread(label, lambda: work(engine), session_id)

    def action_ideate(self) -> None:
        ref = self.selected
        session_id = self.session_of(ref)
        if session_id is None:
            self.app.action_new_session(problem_id=ref.id if ref else None)
            return
        session = queries.session(self.store, session_id)
        if session["status"] == "finished" and session_id not in self.busy:
            # More rounds for a finished session: one more each time n is pressed.
            rounds = SearchSettings.from_dict(self.store.settings(session_id)).rounds + 1
            resume_session(self.store, session_id, rounds=rounds)
            self.notify(f"session {session_id}: round {rounds - 1} added ({rounds} rounds)")
        self.run_engine(session_id, f"ideating (s{session_id})", lambda e: e.ideate())

    def action_step(self) -> None:
        session_id = self.session_of(self.selected)
        self.run_engine(session_id, f"next step (s{session_id})", lambda e: e.step())

    def action_run(self) -> None:
        session_id = self.session_of(self.selected)
        self.run_engine(session_id, f"running (s{session_id})", lambda e: e.run())

    def action_new_session(self) -> None:
        ref = self.selected
        problem_id = ref.id if ref and ref.kind == "problem" else None
        if problem_id is None and ref is not None:
            session = queries.session(self.store, self.session_of(ref) or 0)
            problem_id = session["problem_id"] if session else None
        self.app.action_new_session(problem_id=problem_id)

    def action_implement(self) -> None:
        round_id = self.round_of(self.selected)
        row = queries.round_row(self.store, round_id) if round_id else None
        if row is None:
            self.say("select a round, or an idea or a kernel of it, to implement")
            return
        settings = SearchSettings.from_dict(self.store.settings(row["session_id"]))
        waiting = [idea for idea, _ in policy.implementable(self.store, row["session_id"],
                                                            settings)
                   if idea["round_id"] == round_id]
        if not waiting:
            self.say(f"round {row['n']} has no approved idea short of its implementations: "
                     "a approves one, A all, i adds one")
            return
        # The engine verifies (and repairs) each implementation as soon as it is written.
        self.run_engine(row["session_id"], f"implementing round {row['n']}",
                        lambda e: e.implement(round_id))

    def _verifying(self, session_id: int, what: str) -> str:
        """What the status line says while kernels are verified: no GPU means no timing."""
        no_gpu = SearchSettings.from_dict(self.store.settings(session_id)).eval.no_gpu
        return f"{'compiling (no GPU)' if no_gpu else 'verifying'} {what}"

    def action_evaluate(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        session_id = self.selected.session_id
        if session_id is None:
            self.say(f"k{kernel_id} belongs to no session: eval it from the command line")
            return
        self.run_engine(session_id, self._verifying(session_id, f"k{kernel_id}"),
                        lambda e: e.evaluate([kernel_id], retime=True), need_llm=False,
                        reopen=True)

    def action_resume(self) -> None:
        session_id = self.session_of(self.selected)
        if session_id is None:
            self.say("no session here: N starts one")
            return
        pending = queries.unevaluated_kernels(self.store, session_id)
        if not pending:
            self.say(f"every kernel of session {session_id} has a verdict")
            return
        self.run_engine(session_id,
                        self._verifying(session_id, f"{len(pending)} kernels without a verdict"),
                        lambda e: e.evaluate(pending), need_llm=False, reopen=True)

    def action_cancel(self) -> None:
        if not (self.busy or self.in_flight):
            self.say("nothing is running")
            return
        self.bridge.cancel()
        self.progress = "cancelling…"
        self.update_status()
