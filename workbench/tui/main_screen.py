"""The main screen: tree on the left; idea, CUDA pane, per-round plot and benchmark table on
the right; status line and footer below. Every action calls core (workbench.control, the
engine, workbench.export); this module decides what to show. Engine work lives in
engine_actions.py, human decisions in decisions.py.

Every key acts, or says in the status line why it cannot; the footer shows what applies to the
selection, always after quit, help and the palette.
"""
from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Tree

from workbench.tui import queries
from workbench.tui.bench_table import BenchTable
from workbench.tui.decisions import DecisionActions
from workbench.tui.engine_actions import EngineActions
from workbench.tui.idea_pane import IdeaPane
from workbench.tui.modals import SearchScreen
from workbench.tui.population_views import POPULATION_BINDINGS, PopulationActions
from workbench.tui.profile_view import PROFILE_BINDINGS, ProfileActions
from workbench.tui.round_plot import RoundPlot
from workbench.tui.source_pane import SourcePane
from workbench.tui.status_line import StatusLine
from workbench.tui.tree import KernelTree, NodeRef

IDEA_ACTIONS = {"approve", "veto", "edit_idea", "edit_idea_external"}
KERNEL_ACTIONS = {"evaluate", "edit_kernel", "prune", "pin", "clear_flag", "export",
                  "toggle_source", "toggle_diff", "lesson", "profile"}
# Always first in the footer, whatever else applies (binding ids).
ALWAYS_SHOWN = ("quit", "help", "palette")


class MainScreen(EngineActions, DecisionActions, PopulationActions, ProfileActions, Screen):
    BINDINGS = [
        Binding("n", "ideate", "Ideate", id="ideate",
                tooltip="Start the next round (on a finished session: add one): the LLM "
                        "proposes optimization ideas"),
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
        *POPULATION_BINDINGS,
        *PROFILE_BINDINGS,
    ]

    def __init__(self, store, bridge) -> None:
        super().__init__()
        self.store = store
        self.bridge = bridge
        self.in_flight: set[int] = set()
        self.busy: dict[int, str] = {}  # session id -> what its engine is doing
        self._busy_since: dict[int, float] = {}
        self.progress = ""
        self.hint = ""  # why the last key could not act; cleared when the selection moves
        self._plot_session: int | None = None
        self._footer_kind: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield KernelTree(self.store, self.in_flight, self.busy, id="tree")
            with Vertical(id="right"):
                yield IdeaPane(id="idea")
                yield SourcePane(self.store, id="source")
                yield RoundPlot(id="plot")
                yield BenchTable(id="table")
        yield StatusLine(id="status")
        # The palette key is one of ours (ALWAYS_SHOWN): Footer's own, docked on the right,
        # covered the last key at 80 columns.
        yield Footer(compact=True, show_command_palette=False)

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

    # -- keys and the footer -------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Every key runs its action: one that cannot act says why (see `say`). What applies
        to the selection is the footer's business (`active_bindings`)."""
        return True

    def applies(self, action: str) -> bool:
        """Whether the footer offers `action` for the selection (the palette lists all)."""
        kind = self.selected.kind if self.selected else None
        if action in IDEA_ACTIONS:
            return kind == "idea"
        if action in KERNEL_ACTIONS:
            return kind == "kernel"
        if action in ("implement", "approve_all"):
            return kind in ("round", "idea", "kernel")
        if action == "add_idea":
            return kind in ("session", "round", "idea", "kernel")
        if action == "cancel":
            return bool(self.busy or self.in_flight)
        if action == "resume":
            return kind == "session"
        return True

    @property
    def active_bindings(self):
        """The footer's keys: quit, help and the palette first (they must fit at 80 columns),
        then what applies to the selection."""
        found = super().active_bindings
        first = {key: b for key, b in found.items() if b.binding.id in ALWAYS_SHOWN}
        first = dict(sorted(first.items(), key=lambda kb: ALWAYS_SHOWN.index(kb[1].binding.id)))
        rest = [(key, b) for key, b in found.items() if key not in first
                and (b.node is not self or self.applies(b.binding.action))]
        # What this kind of node offers comes before what its round or any node offers.
        kind = self.selected.kind if self.selected else None
        own = {"kernel": KERNEL_ACTIONS, "idea": IDEA_ACTIONS}.get(kind, set())
        rounds = {"implement", "approve_all", "resume"}
        rest.sort(key=lambda kb: (kb[1].binding.action not in own,
                                  kb[1].binding.action not in rounds))
        return first | dict(rest)

    def say(self, text: str) -> None:
        """Why a key could not act, in the status line, until the selection moves."""
        self.hint = text
        self.update_status()

    # -- showing the selection ---------------------------------------------------------------
    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[NodeRef]) -> None:
        self.hint = ""
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
                f"{len(rows)} kernels · {tree.round_state(row) or 'idle'} · started "
                f"{row['started_at'] or '?'}"))
            table.show_rows(rows, self.in_flight, best, f"round {row['n']}")
            if source:
                pane.show_kernel(None, "Select a kernel (or an idea) to see its CUDA.")
        elif ref.kind == "session":
            session = queries.session(store, ref.id)
            cost = queries.session_cost(store, ref.id)
            reason = f" ({session['stop_reason']})" if session["stop_reason"] else ""
            idea_pane.show_text(f"session {ref.id}", Text(
                f"{session['problem']} · {session['provider']} {session['model']} · "
                f"{session['status']}{reason} · {cost.get('calls', 0)} LLM calls, "
                f"${cost.get('cost_usd', 0):.3f}"))
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
        self.query_one(StatusLine).show(session, cost, len(self.in_flight), busy, self.progress,
                                        self.hint)

    # -- view ----------------------------------------------------------------------------------
    def _shown_source(self) -> SourcePane | None:
        pane = self.query_one(SourcePane)
        if pane.kernel_id is None:
            self.say("no kernel in the CUDA pane: select a kernel first")
            return None
        return pane

    def action_toggle_source(self) -> None:
        if pane := self._shown_source():
            pane.mode = "python" if pane.mode == "cuda" else "cuda"

    def action_toggle_diff(self) -> None:
        if pane := self._shown_source():
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
                self.say("not in the tree (hidden by the filter, f shows it; or hand-made "
                         "without an idea)")
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
