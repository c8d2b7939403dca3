"""The main screen: tree on the left; idea, CUDA pane, per-round plot and benchmark table on
the right; status line and footer below. Every action here calls core (workbench.control,
the engine, workbench.export); this module only decides what to show.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Tree

from workbench import control, events
from workbench.export import export_kernel
from workbench.llm.errors import ProviderError
from workbench.search import SearchError, resume_session
from workbench.tui import queries
from workbench.tui.bench_table import BenchTable
from workbench.tui.engine_bridge import one_line
from workbench.tui.external_editor import edit_in_editor
from workbench.tui.idea_pane import IdeaPane
from workbench.tui.modals import ExportPrompt, IdeaEditor, SearchScreen
from workbench.tui.round_plot import RoundPlot
from workbench.tui.source_pane import SourcePane
from workbench.tui.status_line import StatusLine
from workbench.tui.tree import KernelTree, NodeRef

IDEA_ACTIONS = {"approve", "veto", "edit_idea", "edit_idea_external"}
KERNEL_ACTIONS = {"evaluate", "edit_kernel", "prune", "pin", "clear_flag", "export",
                  "toggle_source", "toggle_diff"}


class MainScreen(Screen):
    BINDINGS = [
        Binding("n", "ideate", "Ideate", id="ideate",
                tooltip="Start the next round: the LLM proposes optimization ideas"),
        Binding("g", "step", "Step", id="step",
                tooltip="The engine's next piece of work (ideate, implement, evaluate, repair)"),
        Binding("G", "run", "Run", id="run",
                tooltip="Run the search until it finishes, stops or waits for review"),
        Binding("N", "new_session", "New session", id="new_session"),
        Binding("a", "approve", "Approve", id="approve"),
        Binding("A", "approve_all", "Approve all", id="approve_all",
                tooltip="Approve every proposed idea of the round"),
        Binding("e", "edit_idea", "Edit", id="edit_idea"),
        Binding("E", "edit_idea_external", "Edit in $EDITOR", id="edit_idea_external"),
        Binding("v", "veto", "Veto", id="veto"),
        Binding("i", "add_idea", "Add idea", id="add_idea"),
        Binding("m", "implement", "Implement", id="implement",
                tooltip="Implement the round's approved ideas, then compile and time them"),
        Binding("t", "evaluate", "Compile+time", id="evaluate"),
        Binding("o", "edit_kernel", "Edit kernel", id="edit_kernel",
                tooltip="Open the kernel in $EDITOR; the edit is evaluated as a new child"),
        Binding("x", "prune", "Prune", id="prune"),
        Binding("p", "pin", "Pin", id="pin"),
        Binding("C", "clear_flag", "Clear flag", id="clear_flag"),
        Binding("w", "export", "Export", id="export"),
        Binding("c", "toggle_source", "CUDA/Py", id="toggle_source"),
        Binding("d", "toggle_diff", "Diff", id="toggle_diff"),
        Binding("s", "sort", "Sort", id="sort"),
        Binding("slash", "search", "Search", id="search"),
        Binding("f", "filter", "Hide dropped", id="filter"),
        Binding("R", "resume", "Resume", id="resume",
                tooltip="Compile and time the session's kernels that have no verdict"),
        Binding("K", "cancel", "Cancel work", id="cancel"),
        Binding("z", "zoom", "Zoom", id="zoom"),
    ]

    def __init__(self, store, bridge) -> None:
        super().__init__()
        self.store = store
        self.bridge = bridge
        self.in_flight: set[int] = set()
        self.busy: dict[int, str] = {}  # session id -> what its engine is doing
        self._busy_since: dict[int, float] = {}
        self.progress = ""
        self._plot_session: int | None = None
        self._footer_kind: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield KernelTree(self.store, self.in_flight, id="tree")
            with Vertical(id="right"):
                yield IdeaPane(id="idea")
                yield SourcePane(self.store, id="source")
                yield RoundPlot(id="plot")
                yield BenchTable(id="table")
        yield StatusLine(id="status")
        yield Footer(compact=True)

    @property
    def kernel_tree(self) -> KernelTree:
        return self.query_one(KernelTree)

    @property
    def selected(self) -> NodeRef | None:
        node = self.kernel_tree.cursor_node
        return node.data if node is not None else None

    def on_mount(self) -> None:
        self.kernel_tree.focus()
        self.update_status()
        # Work in flight shows its elapsed time, so a long LLM call visibly is still going.
        self.set_interval(1.0, lambda: self.update_status() if self.busy else None)

    # -- what the selection refers to --------------------------------------------------------
    def session_of(self, ref: NodeRef | None) -> int | None:
        if ref is None:
            return None
        if ref.kind == "problem":
            row = queries.latest_session(self.store, ref.id)
            return row["id"] if row else None
        if ref.kind == "session":
            return ref.id
        if ref.kind == "round":
            row = queries.round_row(self.store, ref.id)
            return row["session_id"] if row else None
        return ref.session_id

    def round_of(self, ref: NodeRef | None) -> int | None:
        if ref is None:
            return None
        if ref.kind == "round":
            return ref.id
        if ref.kind == "idea":
            row = queries.idea(self.store, ref.id)
            return row["round_id"] if row else None
        if ref.kind == "kernel":
            row = queries.kernel(self.store, ref.id)
            idea = queries.idea(self.store, row["idea_id"]) if row and row["idea_id"] else None
            return idea["round_id"] if idea else None
        session_id = self.session_of(ref)
        rounds = queries.rounds(self.store, session_id) if session_id else []
        return rounds[-1]["id"] if rounds else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Show in the footer only what applies to the selection (the palette lists all)."""
        kind = self.selected.kind if self.selected else None
        if action in IDEA_ACTIONS:
            return kind == "idea"
        if action in KERNEL_ACTIONS:
            return kind == "kernel"
        if action in ("implement", "approve_all"):
            return kind in ("round", "idea")
        if action == "add_idea":
            return kind in ("session", "round", "idea", "kernel")
        if action == "cancel":
            return bool(self.busy or self.in_flight)
        if action == "resume":
            return kind == "session"
        return True

    # -- showing the selection ---------------------------------------------------------------
    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[NodeRef]) -> None:
        self.show_selection(source=True)
        kind = event.node.data.kind if event.node.data else None
        if kind != self._footer_kind:
            # The footer recomposes on every bindings refresh: only when the actions change.
            self._footer_kind = kind
            self.refresh_bindings()

    def show_selection(self, source: bool = True) -> None:
        """Fill the panes for the selected node; `source` False keeps the CUDA pane as is."""
        ref = self.selected
        if ref is None:
            return
        store, tree = self.store, self.kernel_tree
        table, idea_pane, pane = (self.query_one(BenchTable), self.query_one(IdeaPane),
                                  self.query_one(SourcePane))
        session_id = self.session_of(ref)
        best = tree.best_of(session_id)
        if ref.kind == "kernel":
            row = queries.kernel(store, ref.id)
            idea = queries.idea(store, row["idea_id"]) if row and row["idea_id"] else None
            if idea:
                idea_pane.show_idea(idea)
                table.show_rows(queries.all_idea_kernels(store, idea["id"]), self.in_flight,
                                best, f"idea {idea['id']} · round {idea['round_n']}")
                self._move_table_cursor(ref.id)
            if source:
                pane.show_kernel(ref.id)
        elif ref.kind == "idea":
            idea = queries.idea(store, ref.id)
            if idea is None:
                return
            idea_pane.show_idea(idea)
            rows = queries.all_idea_kernels(store, ref.id)
            table.show_rows(rows, self.in_flight, best,
                            f"idea {ref.id} · round {idea['round_n']}")
            if source:
                seed = idea["seed_kernel_id"]
                pane.show_kernel(rows[0]["id"] if rows else None,
                                 "No kernels yet: m implements the round's approved ideas."
                                 if seed is None else f"Seed: k{seed}. No kernels yet.")
        elif ref.kind == "round":
            row = queries.round_row(store, ref.id)
            rows = queries.round_kernels(store, ref.id)
            idea_pane.show_text(f"round {row['n']}", Text(
                f"{len(rows)} kernels · status {row['status'] or '?'} · started "
                f"{row['started_at'] or '?'}"))
            table.show_rows(rows, self.in_flight, best, f"round {row['n']}")
            if source:
                pane.show_kernel(None, "Select a kernel (or an idea) to see its CUDA.")
        elif ref.kind == "session":
            session = queries.session(store, ref.id)
            cost = queries.session_cost(store, ref.id)
            idea_pane.show_text(f"session {ref.id}", Text(
                f"{session['problem']} · {session['provider']} {session['model']} · "
                f"{session['status']}{' (' + session['stop_reason'] + ')' if session['stop_reason'] else ''}"
                f" · {cost.get('calls', 0)} LLM calls, ${cost.get('cost_usd', 0):.3f}"))
            table.show_rows([], self.in_flight, best, "expand a round for its kernels")
            if source:
                pane.show_kernel(best, "No correct kernel yet.")
        else:
            idea_pane.show_text("problem", Text(f"{tree.cursor_node.label.plain}: "
                                                "N starts a new session on it."))
            table.show_rows([], self.in_flight, None, "")
            if source:
                pane.show_kernel(None, "Expand a session to see its kernels.")
        self.refresh_plot(session_id)
        self.update_status()

    def _move_table_cursor(self, kernel_id: int) -> None:
        table = self.query_one(BenchTable)
        try:
            table.move_cursor(row=table.get_row_index(str(kernel_id)), animate=False)
        except Exception:  # noqa: BLE001 - the row may be filtered out; nothing to move to
            pass

    def refresh_plot(self, session_id: int | None, force: bool = False) -> None:
        if session_id == self._plot_session and not force:
            return
        self._plot_session = session_id
        rounds = queries.rounds(self.store, session_id) if session_id else []
        self.query_one(RoundPlot).show([(r["n"], r["best"]) for r in rounds])

    def update_status(self) -> None:
        session_id = self.session_of(self.selected)
        session = queries.session(self.store, session_id) if session_id else None
        cost = queries.session_cost(self.store, session_id) if session_id else {}
        now = time.monotonic()
        busy = [f"{label} {now - self._busy_since.get(sid, now):.0f}s"
                for sid, label in self.busy.items()]
        self.query_one(StatusLine).show(session, cost, len(self.in_flight), busy, self.progress)

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
            row = queries.kernel(self.store, event.kernel_id)
            if row is not None:
                if row["idea_id"] is not None:
                    tree.sync("idea", row["idea_id"])
                if row["parent_id"] is not None:
                    tree.sync("kernel", row["parent_id"])
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
                   need_llm: bool = True) -> None:
        """Run `work(engine)` in a thread worker; one job per session at a time. A stopped
        session is resumed first: asking it for work is asking it to continue."""
        if session_id is None:
            self.notify("no session here: N starts one", severity="warning")
            return
        if session_id in self.busy:
            self.notify(f"session {session_id} is busy: {self.busy[session_id]} "
                        "(K cancels)", severity="warning")
            return
        try:
            if queries.session(self.store, session_id)["status"] == "stopped":
                resume_session(self.store, session_id)
            engine = self.bridge.engine(session_id, need_llm=need_llm)
        except (ProviderError, SearchError) as e:
            self.notify(str(e), severity="error", timeout=10)
            return
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
            self.notify("select a round or an idea to implement", severity="warning")
            return
        # The engine verifies (and repairs) each implementation as soon as it is written.
        self.run_engine(row["session_id"], f"implementing round {row['n']}",
                        lambda e: e.implement(round_id))

    def action_evaluate(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is not None:
            self.run_engine(self.selected.session_id, f"timing k{kernel_id}",
                            lambda e: e.evaluate([kernel_id]), need_llm=False)

    def action_resume(self) -> None:
        session_id = self.session_of(self.selected)
        pending = queries.unevaluated_kernels(self.store, session_id) if session_id else []
        if not pending:
            self.notify("every kernel of this session has a verdict")
            return
        self.run_engine(session_id, f"timing {len(pending)} kernels without a verdict",
                        lambda e: e.evaluate(pending), need_llm=False)

    def action_cancel(self) -> None:
        if not (self.busy or self.in_flight):
            self.notify("nothing is running")
            return
        self.bridge.cancel()
        self.progress = "cancelling…"
        self.update_status()

    # -- human decisions (core: workbench.control) -----------------------------------------
    def _control(self, fn: Callable[[], Any]) -> Any:
        """Run a control operation; its refusal is one line in a notification."""
        try:
            return fn()
        except control.ControlError as e:
            self.notify(str(e), severity="warning")
            return None

    def _idea_id(self) -> int | None:
        ref = self.selected
        if ref is None or ref.kind != "idea":
            self.notify("select an idea first", severity="warning")
            return None
        return ref.id

    def _kernel_id(self) -> int | None:
        ref = self.selected
        if ref is None or ref.kind != "kernel":
            self.notify("select a kernel first", severity="warning")
            return None
        return ref.id

    def _idea_changed(self, idea_id: int) -> None:
        idea = queries.idea(self.store, idea_id)
        if idea:
            self.kernel_tree.sync("round", idea["round_id"])
        self.show_selection(source=False)
        self.refresh_bindings()

    def action_approve(self) -> None:
        idea_id = self._idea_id()
        if idea_id is not None:
            self._control(lambda: control.approve_idea(self.store, idea_id))
            self._idea_changed(idea_id)

    def action_approve_all(self) -> None:
        round_id = self.round_of(self.selected)
        if round_id is None:
            self.notify("select a round or an idea", severity="warning")
            return
        proposed = [i["id"] for i in queries.ideas(self.store, round_id)
                    if i["status"] == "proposed"]
        for idea_id in proposed:
            self._control(lambda: control.approve_idea(self.store, idea_id))
        self.kernel_tree.sync("round", round_id)
        self.show_selection(source=False)
        self.notify(f"approved {len(proposed)} idea(s); m implements them")

    def action_veto(self) -> None:
        idea_id = self._idea_id()
        if idea_id is not None:
            self._control(lambda: control.veto_idea(self.store, idea_id))
            self._idea_changed(idea_id)

    def _save_idea_text(self, idea_id: int, text: str | None) -> None:
        if text is None:
            return
        self._control(lambda: control.edit_idea(self.store, idea_id, text))
        self._idea_changed(idea_id)

    def action_edit_idea(self) -> None:
        idea_id = self._idea_id()
        if idea_id is None:
            return
        idea = queries.idea(self.store, idea_id)
        self.app.push_screen(IdeaEditor(f"Edit idea {idea_id}", idea["text"]),
                             lambda text: self._save_idea_text(idea_id, text))

    def action_edit_idea_external(self) -> None:
        idea_id = self._idea_id()
        if idea_id is None:
            return
        text = self._external(queries.idea(self.store, idea_id)["text"], ".md")
        if text is not None:
            self._save_idea_text(idea_id, text)

    def action_add_idea(self) -> None:
        ref = self.selected
        round_id = self.round_of(ref)
        if round_id is None:
            self.notify("this session has no round yet: n starts one", severity="warning")
            return
        seed = ref.id if ref and ref.kind == "kernel" else None
        title = f"New idea for round {queries.round_row(self.store, round_id)['n']}" + (
            f", seeded by k{seed}" if seed else "")

        def save(text: str | None) -> None:
            if text is None:
                return
            idea_id = self._control(lambda: control.add_idea(self.store, round_id, text,
                                                             seed_kernel_id=seed))
            if idea_id is not None:
                self.kernel_tree.sync("round", round_id)
                self.kernel_tree.reveal(queries.path_to_idea(self.store, idea_id))

        self.app.push_screen(IdeaEditor(title), save)

    def _external(self, text: str, suffix: str) -> str | None:
        try:
            edited = edit_in_editor(self.app, text, suffix)
        except OSError as e:
            self.notify(f"cannot run $EDITOR: {e.strerror or e}", severity="error")
            return None
        if edited is None:
            self.notify("the editor exited with an error; nothing changed", severity="warning")
        elif edited == text:
            self.notify("no change")
            return None
        return edited

    def action_edit_kernel(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        source = queries.kernel_source(self.store, kernel_id) or ""
        edited = self._external(source, ".py")
        if edited is None:
            return
        child = self._control(lambda: control.add_child_kernel(self.store, kernel_id, edited))
        if child is None:
            return
        parent = self.kernel_tree.node_for("kernel", kernel_id)
        if parent is not None:
            parent.allow_expand = True
        self.kernel_tree.sync("kernel", kernel_id)
        self.kernel_tree.reveal(queries.path_to_kernel(self.store, child))
        self.run_engine(self.selected.session_id, f"timing k{child}",
                        lambda e: e.evaluate([child]), need_llm=False)

    def _kernel_changed(self, kernel_ids: list[int], session_id: int | None) -> None:
        for kernel_id in kernel_ids:
            self.kernel_tree.relabel_kernel(kernel_id)
        if session_id is not None:
            self.kernel_tree.refresh_best(session_id)
        self.show_selection(source=False)

    def action_prune(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        pruned = not queries.kernel(self.store, kernel_id)["pruned"]
        ids = self._control(lambda: control.prune_kernel(self.store, kernel_id, pruned=pruned))
        if ids is not None:
            self._kernel_changed(ids, self.selected.session_id)
            self.notify(f"{'pruned' if pruned else 'restored'} {len(ids)} kernel(s)")

    def action_pin(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        pinned = not queries.kernel(self.store, kernel_id)["pinned"]
        self._control(lambda: control.pin_kernel(self.store, kernel_id, pinned=pinned))
        self._kernel_changed([kernel_id], None)
        self.notify(f"k{kernel_id} {'pinned: it seeds every round' if pinned else 'unpinned'}")

    def action_clear_flag(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        self._control(lambda: control.clear_kernel(self.store, kernel_id))
        self._kernel_changed([kernel_id], self.selected.session_id)

    def action_export(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return

        def chosen(answer: tuple[str, bool] | None) -> None:
            if answer is None:
                return
            out_dir, allow_unverified = answer
            self.app.run_in_thread(
                f"export k{kernel_id}",
                lambda: export_kernel(self.store, kernel_id, out_dir,
                                      allow_unverified=allow_unverified), None)

        self.app.push_screen(ExportPrompt(kernel_id, f"exports/k{kernel_id}"), chosen)

    # -- view ----------------------------------------------------------------------------------
    def action_toggle_source(self) -> None:
        pane = self.query_one(SourcePane)
        pane.mode = "python" if pane.mode == "cuda" else "cuda"

    def action_toggle_diff(self) -> None:
        pane = self.query_one(SourcePane)
        pane.diff = not pane.diff

    def action_sort(self) -> None:
        column = self.query_one(BenchTable).next_sort()
        self.notify(f"sorted by {column}", timeout=2)

    def action_filter(self) -> None:
        tree = self.kernel_tree
        tree.set_hide_dropped(not tree.hide_dropped)
        self.notify("vetoed ideas and pruned kernels hidden" if tree.hide_dropped
                    else "showing everything", timeout=3)

    def action_search(self) -> None:
        def go(hit: dict | None) -> None:
            if hit is None:
                return
            path = (queries.path_to_kernel(self.store, hit["id"]) if hit["kind"] == "kernel"
                    else queries.path_to_idea(self.store, hit["id"]))
            if not path or not self.kernel_tree.reveal(path):
                self.notify("not in the tree (hidden by the filter, or hand-made without an "
                            "idea)", severity="warning")
            self.kernel_tree.focus()

        self.app.push_screen(SearchScreen(self.store), go)

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused)

    def reveal_session(self, session_id: int) -> None:
        session = queries.session(self.store, session_id)
        if session is None:
            return
        self.kernel_tree.sync("root", 0)
        self.kernel_tree.sync("problem", session["problem_id"])
        if self.kernel_tree.reveal([("problem", session["problem_id"]), ("session", session_id)]):
            node = self.kernel_tree.node_for("session", session_id)
            node.expand()
