"""The population in the app: the kernel bank (browse, diff, pick a seed), the session's
archive with why each seed was chosen, and lessons written while reviewing a kernel.

MainScreen mixes in PopulationActions and lists POPULATION_BINDINGS; everything else is here.
"""
from __future__ import annotations

import difflib

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static

from workbench import bank
from workbench.lessons import LessonError, add_lesson
from workbench.search import SearchSettings
from workbench.search.policy import archive_summary
from workbench.store import Store

POPULATION_BINDINGS = [
    Binding("b", "bank", "Bank", id="bank",
            tooltip="Verified kernels of every session: filter, diff, pick one as a seed"),
    Binding("Y", "archive", "Archive", id="archive",
            tooltip="The session's archive cells and why each round's seeds were chosen"),
    Binding("L", "lesson", "Lesson", id="lesson",
            tooltip="Write a lesson about this kernel for later ideation of its op family"),
]


class BankScreen(ModalScreen[int | None]):
    """Returns the kernel picked as a seed, or None. `against`: the kernel to diff with."""

    DEFAULT_CSS = """
    BankScreen #dialog { width: 96%; max-width: 160; height: 90%; }
    BankScreen DataTable { height: 1fr; }
    BankScreen #bank-preview-scroll { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="bank.close"),
        Binding("ctrl+d", "toggle_diff", "Diff", id="bank.diff", priority=True),
        Binding("ctrl+s", "pick", "Pick as seed", id="bank.pick", priority=True),
    ]

    def __init__(self, store: Store, against: int | None = None) -> None:
        super().__init__()
        self.store = store
        self.against = against
        self.diff = False
        self.entries: list[dict] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="bank"):
            yield Label("Kernel bank: verified kernels of every session", id="dialog-title")
            yield Input(placeholder="filter: words, or family:matmul dtype:float16 "
                                    "shape:large technique:smem", id="bank-query")
            yield DataTable(id="bank-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="bank-preview-scroll"):
                yield Static(id="bank-preview")
            yield Label("enter/ctrl+s pick as seed of the session's next round · ctrl+d diff "
                        "with the selected kernel · esc close", classes="hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("kernel", "problem", "family", "dtype", "shape", "ms", "eager",
                          "techniques")
        self.fill("")
        table.focus()

    def fill(self, query: str) -> None:
        self.entries = bank.search(self.store, query)
        table = self.query_one(DataTable)
        table.clear()
        for e in self.entries:
            speed = f"{e['speedup_eager']:.2f}x" if e["speedup_eager"] else "-"
            table.add_row(f"k{e['kernel']}", e["problem"], e["family"], e["dtype"], e["shape"],
                          f"{e['time_ms']:.4f}", speed, "+".join(e["techniques"]) or "plain",
                          key=str(e["kernel"]))
        self.preview()

    def highlighted(self) -> int | None:
        table = self.query_one(DataTable)
        if not self.entries or table.cursor_row is None or table.cursor_row >= len(self.entries):
            return None
        return self.entries[table.cursor_row]["kernel"]

    def preview(self) -> None:
        pane = self.query_one("#bank-preview", Static)
        kernel_id = self.highlighted()
        if kernel_id is None:
            pane.update(Text("no verified kernels match"))
            return
        source = self.store.get("kernels", kernel_id)["source"]
        if self.diff and self.against is not None:
            other = self.store.get("kernels", self.against)["source"]
            diff = "".join(difflib.unified_diff(
                other.splitlines(keepends=True), source.splitlines(keepends=True),
                f"k{self.against}", f"k{kernel_id}"))
            pane.update(Syntax(diff or "(the same source)", "diff", theme="ansi_dark"))
        else:
            pane.update(Syntax(source, "python", theme="ansi_dark", line_numbers=True))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.preview()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_pick()

    def action_toggle_diff(self) -> None:
        if self.against is None:
            self.notify("select a kernel in the tree first to diff against it", timeout=3)
            return
        self.diff = not self.diff
        self.preview()

    def action_pick(self) -> None:
        self.dismiss(self.highlighted())

    def action_close(self) -> None:
        self.dismiss(None)


class ArchiveScreen(ModalScreen[None]):
    """The session's archive: each cell's best kernel, and the seeds of each round with why."""

    BINDINGS = [Binding("escape", "close", "Close", id="archive.close")]

    def __init__(self, store: Store, session_id: int) -> None:
        super().__init__()
        self.store = store
        self.session_id = session_id

    def compose(self) -> ComposeResult:
        settings = SearchSettings.from_dict(self.store.settings(self.session_id))
        summary = archive_summary(self.store, self.session_id, settings)
        text = Text()
        text.append(f"Archive of session {self.session_id}: the best kernel of each cell "
                    "(kind × techniques)\n", "bold")
        for c in summary["cells"] or []:
            time_ms = "untimed" if c["time_ms"] is None else f"{c['time_ms']:.4f} ms"
            text.append(f"  k{c['kernel_id']:<6} {time_ms:>12}  {c['cell']}\n")
        if not summary["cells"]:
            text.append("  empty: no kernel may seed yet\n", "dim")
        text.append("\nSeeds by round, and why\n", "bold")
        for r in summary["rounds"]:
            if not r["seeds"]:
                text.append(f"  round {r['n']}: (no seeds recorded)\n", "dim")
            for s in r["seeds"]:
                name = "reference" if s["kernel_id"] is None else f"k{s['kernel_id']}"
                cell = f" [{s['cell']}]" if s.get("cell") else ""
                text.append(f"  round {r['n']}: {name}{cell}: {s['reason']}\n")
        with Vertical(id="dialog"):
            with VerticalScroll():
                yield Static(text, id="archive-text")
            yield Label("esc close", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)


class LessonScreen(ModalScreen[str | None]):
    """Returns the lesson's text, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="lesson.cancel")]

    def __init__(self, kernel_id: int, family: str) -> None:
        super().__init__()
        self.kernel_id = kernel_id
        self.family = family

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Lesson about k{self.kernel_id}, shown to later ideation of "
                        f"{self.family} ops", id="dialog-title")
            yield Input(placeholder="e.g. smem index precompute helped", id="lesson-input")
            with Horizontal(classes="buttons"):
                yield Button("Save (enter)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value if event.button.id == "save" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PopulationActions:
    """MainScreen's actions for the bank, the archive and lessons."""

    store: Store

    def action_bank(self) -> None:
        ref = self.selected
        against = ref.id if ref is not None and ref.kind == "kernel" else None
        session_id = self.session_of(ref)

        def picked(kernel_id: int | None) -> None:
            if kernel_id is None:
                return
            if session_id is None:
                self.say("select a session to seed: the pick seeds its next round")
                return
            bank.add_seed(self.store, session_id, kernel_id)
            self.notify(f"k{kernel_id} will seed the next round of session {session_id}",
                        timeout=3)

        self.app.push_screen(BankScreen(self.store, against), picked)

    def action_archive(self) -> None:
        session_id = self.session_of(self.selected)
        if session_id is None:
            self.say("select a session (or anything in it) to see its archive")
            return
        self.app.push_screen(ArchiveScreen(self.store, session_id))

    def action_lesson(self) -> None:
        ref = self.selected
        if ref is None or ref.kind != "kernel":
            self.say("select a kernel: a lesson is written about a kernel you reviewed")
            return
        kernel = self.store.get("kernels", ref.id)
        family = self.store.get("problems", kernel["problem_id"])["family"] or "unknown"

        def save(text: str | None) -> None:
            if text is None:
                return
            try:
                add_lesson(self.store, text, kernel_id=ref.id)
            except LessonError as e:
                self.say(str(e))
                return
            self.notify(f"lesson saved for {family} ops", timeout=3)

        self.app.push_screen(LessonScreen(ref.id, family), save)
