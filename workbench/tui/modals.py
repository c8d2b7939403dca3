"""Modal screens: edit or write an idea, choose an export directory, search, help, confirm."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from workbench.store import Store
from workbench.tui import glyphs, queries
from workbench.tui.tick_box import TickBox


class IdeaEditor(ModalScreen[str | None]):
    """Returns the new text, or None when cancelled; cancelling a changed text asks first."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="idea_editor.save"),
        Binding("escape", "cancel", "Cancel", id="idea_editor.cancel"),
    ]

    def __init__(self, title: str, text: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            area = TextArea(self.text, id="idea-input", soft_wrap=True, show_line_numbers=False)
            area.cursor_blink = False  # a blinking cursor repaints forever, over SSH too
            yield area
            with Horizontal(classes="buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        if self.query_one(TextArea).text == self.text:
            self.dismiss(None)
            return

        def answer(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        self.app.push_screen(ConfirmScreen("Discard what you typed?", "The text is not saved "
                                           "(ctrl+s saves it).", "Discard", "Keep editing"),
                             answer)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_save() if event.button.id == "save" else self.action_cancel()


class ExportPrompt(ModalScreen[tuple[str, bool] | None]):
    """Returns (directory, allow_unverified), or None when cancelled. Enter exports from
    anywhere in the dialog (space ticks the box), except on Cancel."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export.cancel"),
                Binding("enter", "submit", "Export", id="export.submit", priority=True)]

    def __init__(self, kernel_id: int, default_dir: str) -> None:
        super().__init__()
        self.kernel_id = kernel_id
        self.default_dir = default_dir

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Export kernel {self.kernel_id} to:", id="dialog-title")
            yield Input(self.default_dir, id="export-dir")
            yield TickBox("export even if not verified correct", id="allow-unverified")
            with Horizontal(classes="buttons"):
                yield Button("Export (enter)", id="export", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def action_submit(self) -> None:
        if isinstance(self.focused, Button) and self.focused.id == "cancel":
            self.dismiss(None)
            return
        path = self.query_one(Input).value.strip()
        self.dismiss((path, self.query_one(TickBox).value) if path else None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_submit() if event.button.id == "export" else self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class SearchScreen(ModalScreen[dict | None]):
    """Find ideas by text, or a kernel by id (k123); returns the chosen hit."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="search.cancel")]

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.hits: list[dict] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Search ideas, or go to a kernel (k123):", id="dialog-title")
            yield Input(placeholder="text or k123", id="search-input")
            yield OptionList(id="search-hits")

    def on_input_changed(self, event: Input.Changed) -> None:
        text = event.value.strip()
        self.hits = queries.search(self.store, text) if text else []
        hits = self.query_one(OptionList)
        hits.clear_options()
        for hit in self.hits:
            if hit["kind"] == "kernel":
                hits.add_option(Option(Text(f"kernel k{hit['id']}")))
            else:
                label = Text(f"r{hit['n']} ")
                label.append_text(glyphs.idea_label(hit, width=60))
                hits.add_option(Option(label))
        if self.hits:
            hits.highlighted = 0

    def on_input_submitted(self) -> None:
        index = self.query_one(OptionList).highlighted
        self.dismiss(self.hits[index] if self.hits and index is not None else None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.hits[event.option_index])

    def on_key(self, event) -> None:
        # Arrow keys move through the hits while typing continues in the input.
        if event.key in ("down", "up") and self.hits:
            hits = self.query_one(OptionList)
            hits.action_cursor_down() if event.key == "down" else hits.action_cursor_up()
            event.stop()

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key (with its binding id, for the keymap), the glyphs, and where config lives."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close")]

    def __init__(self, rows: list[tuple[str, str, str]], config_path: str) -> None:
        super().__init__()
        self.rows = rows
        self.config_path = config_path

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Keys", "bold")
        text.append("  (remap: [keymap] binding_id = \"key\" in ")
        text.append(self.config_path, "italic")
        text.append(")\n")
        for key, description, binding_id in self.rows:
            text.append(f"  {key:<10}", "bold")
            text.append(f"{description:<28}")
            text.append(f"{binding_id}\n", "dim")
        text.append("\nKernels  ", "bold")
        for state, (glyph, style) in glyphs.KERNEL_STATES.items():
            text.append(glyph, style)
            text.append(f" {state}  ")
        text.append(glyphs.PIN[0], glyphs.PIN[1])
        text.append(" pinned\nIdeas    ", "bold")
        for state, (glyph, style) in glyphs.IDEA_STATES.items():
            text.append(glyph, style)
            text.append(f" {state}  ")
        with Vertical(id="dialog", classes="help"):
            with VerticalScroll(id="help-scroll"):
                yield Static(text, id="help-text")
            yield Label("↑↓ PgUp PgDn scroll · esc closes", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()


class ConfirmScreen(ModalScreen[bool]):
    """Ask before something that discards work: y (or Enter on the first button) goes ahead,
    n or esc stays. Returns whether to go ahead."""

    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm.yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm.no")]

    def __init__(self, title: str, text: str, yes: str, no: str) -> None:
        super().__init__()
        self.title_text, self.text, self.yes, self.no = title, text, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.text)
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button(f"{self.no} (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()   # the safe answer is the default

    def action_answer(self, go: bool) -> None:
        self.dismiss(go)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
