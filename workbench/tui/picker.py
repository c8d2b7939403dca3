"""Start a session: pick a problem from the library and the LLM to drive the search."""
from __future__ import annotations

import ast
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList
from textual.widgets.option_list import Option

from workbench.llm import PROVIDERS
from workbench.problems import library_paths


@dataclass
class SessionRequest:
    problem: str
    provider: str
    model: str
    base_url: str | None


def library() -> list[tuple[str, str]]:
    """(name, first docstring line) for each library problem, without importing torch."""
    found = []
    for path in library_paths():
        try:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        except (OSError, SyntaxError, UnicodeDecodeError):
            doc = "(unreadable)"
        found.append((path.stem, doc.strip().splitlines()[0] if doc.strip() else ""))
    return found


class ProblemPicker(ModalScreen[SessionRequest | None]):
    """Returns what to start, or None when dismissed."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="picker.cancel"),
        Binding("ctrl+s", "start", "Start session", id="picker.start"),
    ]

    def __init__(self, llm: dict, selected: str | None = None) -> None:
        super().__init__()
        self.llm = llm
        self.selected = selected
        self.problems = library()

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="picker"):
            yield Label("New session: pick a problem, set the LLM, ctrl+s starts",
                        id="dialog-title")
            options = [Option(Text.assemble((name, "bold"), "  ", (doc, "dim")), id=name)
                       for name, doc in self.problems]
            yield OptionList(*options, id="problem-list")
            with Horizontal(classes="form"):
                yield Input(self.llm.get("provider") or "", placeholder="|".join(PROVIDERS),
                            id="provider")
                yield Input(self.llm.get("model") or "", placeholder="model", id="model")
                yield Input(self.llm.get("base_url") or "", placeholder="base URL (optional)",
                            id="base-url")
            with Horizontal(classes="buttons"):
                yield Button("Start (ctrl+s)", id="start", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        options = self.query_one("#problem-list", OptionList)
        names = [name for name, _ in self.problems]
        options.highlighted = names.index(self.selected) if self.selected in names else 0
        options.focus()

    def on_option_list_option_selected(self) -> None:
        # Enter on a problem moves on to the LLM fields (or starts if they are filled in).
        provider, model = self.query_one("#provider", Input), self.query_one("#model", Input)
        if provider.value and model.value:
            self.action_start()
        else:
            (model if provider.value else provider).focus()

    def on_input_submitted(self) -> None:
        self.action_start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_start() if event.button.id == "start" else self.dismiss(None)

    def action_start(self) -> None:
        options = self.query_one("#problem-list", OptionList)
        if options.highlighted is None:
            self.notify("pick a problem first", severity="warning")
            return
        self.dismiss(SessionRequest(
            problem=self.problems[options.highlighted][0],
            provider=self.query_one("#provider", Input).value.strip(),
            model=self.query_one("#model", Input).value.strip(),
            base_url=self.query_one("#base-url", Input).value.strip() or None))

    def action_cancel(self) -> None:
        self.dismiss(None)
