"""Start a session: pick a problem from the library, the LLM, and the search settings."""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, OptionList
from textual.widgets.option_list import Option

from workbench.llm import PROVIDERS
from workbench.problems import library_paths
from workbench.search import SearchSettings

HINT = "a blank field takes its default (shown greyed)"


@dataclass
class SessionRequest:
    problem: str
    provider: str
    model: str
    base_url: str | None
    settings: SearchSettings


@dataclass(frozen=True)
class Field:
    """A number on the form; `key` names the SearchSettings (or, for `tolerance`, the
    EvalSettings) attribute it sets, and is the Input's id."""
    key: str
    label: str
    kind: type[int] | type[float]
    minimum: int
    tolerance: bool = False

    def parse(self, text: str, default: int | float | None) -> int | float | None:
        """The value typed, or `default` when blank; ValueError (one line) when it is bad."""
        text = text.strip()
        if not text:
            return default
        try:
            value = self.kind(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            whole = "a whole number" if self.kind is int else "a number"
            raise ValueError(f"{self.label}: {text!r} is not {whole}")
        if value < self.minimum:
            raise ValueError(f"{self.label}: must be at least {self.minimum}" if self.minimum
                             else f"{self.label}: must not be negative")
        return value


# Two lines of the form, as the CLI's --rounds ... --rtol flags.
SEARCH_FIELDS = (Field("rounds", "rounds R", int, 1), Field("ideas", "ideas N", int, 1),
                 Field("impls", "impls M", int, 1), Field("top_k", "top-k", int, 1),
                 Field("repairs", "repairs", int, 0))
LIMIT_FIELDS = (Field("budget_usd", "budget $", float, 0),
                Field("budget_tokens", "tokens", int, 0),
                Field("atol", "atol", float, 0, tolerance=True),
                Field("rtol", "rtol", float, 0, tolerance=True))


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


def _shown(value: int | float | None) -> str:
    return "" if value is None else f"{value:g}"


def _placeholder(field: Field, default: int | float | None) -> str:
    if default is not None:
        return _shown(default)
    return "problem's" if field.tolerance else "none"


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
        # Review on: in the workbench a person approves, edits or vetoes each idea.
        self.defaults = SearchSettings(review=True)

    def _default(self, field: Field) -> int | float | None:
        return getattr(self.defaults.eval if field.tolerance else self.defaults, field.key)

    def _row(self, fields: tuple[Field, ...]) -> ComposeResult:
        with Horizontal(classes="row"):
            for field in fields:
                default = self._default(field)
                yield Label(field.label)
                yield Input(_shown(default), placeholder=_placeholder(field, default),
                            id=field.key, compact=True)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="picker"):
            yield Label("New session: pick a problem, set the LLM and the search; ctrl+s "
                        "starts", id="dialog-title")
            options = [Option(Text.assemble((name, "bold"), "  ", (doc, "dim")), id=name)
                       for name, doc in self.problems]
            yield OptionList(*options, id="problem-list")
            with Horizontal(classes="row"):
                yield Label("provider")
                yield Input(self.llm.get("provider") or "", placeholder="|".join(PROVIDERS),
                            id="provider", compact=True)
                yield Label("model")
                yield Input(self.llm.get("model") or "", id="model", compact=True)
                yield Label("base URL")
                yield Input(self.llm.get("base_url") or "", placeholder="optional",
                            id="base-url", compact=True)
            yield from self._row(SEARCH_FIELDS)
            yield from self._row(LIMIT_FIELDS)
            with Horizontal(classes="row"):
                yield Checkbox("review each idea", self.defaults.review, id="review",
                               compact=True)
                yield Checkbox("no GPU: compile + static guards only",
                               self.defaults.eval.no_gpu, id="no-gpu", compact=True)
            yield Label(HINT, id="picker-message", classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

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

    def _settings(self) -> SearchSettings | None:
        """The form's settings, or None after saying (in place) which value is wrong."""
        settings = SearchSettings(review=self.query_one("#review", Checkbox).value)
        settings.eval.no_gpu = self.query_one("#no-gpu", Checkbox).value
        self.query("Input.-invalid").remove_class("-invalid")
        for field in SEARCH_FIELDS + LIMIT_FIELDS:
            box = self.query_one(f"#{field.key}", Input)
            target = settings.eval if field.tolerance else settings
            try:
                setattr(target, field.key, field.parse(box.value, self._default(field)))
            except ValueError as e:
                box.add_class("-invalid")
                box.focus()
                message = self.query_one("#picker-message", Label)
                message.update(str(e))
                message.set_classes("error")  # Label's error variant
                return None
        return settings

    def action_start(self) -> None:
        options = self.query_one("#problem-list", OptionList)
        if options.highlighted is None:
            self.notify("pick a problem first", severity="warning")
            return
        settings = self._settings()
        if settings is None:
            return
        self.dismiss(SessionRequest(
            problem=self.problems[options.highlighted][0],
            provider=self.query_one("#provider", Input).value.strip(),
            model=self.query_one("#model", Input).value.strip(),
            base_url=self.query_one("#base-url", Input).value.strip() or None,
            settings=settings))

    def action_cancel(self) -> None:
        self.dismiss(None)
