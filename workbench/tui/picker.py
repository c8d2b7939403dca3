"""Start a session: pick a problem from the library, the LLM, and the search settings.

Nothing typed is lost: a bad value (a number, the provider, a missing key) is refused in place,
and the app reopens the picker as it was when the session cannot start. Type to filter the
problem list.
"""
from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList
from textual.widgets.option_list import Option

from workbench import cuda_env, pyast
from workbench.llm import PROVIDERS
from workbench.problems import library_paths
from workbench.search import SearchSettings
from workbench.tui.tick_box import TickBox

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
    """A number on the form; `key` names the SearchSettings (or, `on_eval`, the EvalSettings)
    attribute it sets, and is the Input's id."""
    key: str
    label: str
    kind: type[int] | type[float]
    minimum: int
    on_eval: bool = False
    blank: str | None = None  # what a blank box means, when not the problem's or nothing

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


# Two lines of the form, as the CLI's --rounds ... --rtol flags (--compile-timeout: compile s).
SEARCH_FIELDS = (Field("rounds", "rounds R", int, 1), Field("ideas", "ideas N", int, 1),
                 Field("impls", "impls M", int, 1), Field("top_k", "top-k", int, 1),
                 Field("repairs", "repairs", int, 0))
LIMIT_FIELDS = (Field("budget_usd", "budget $", float, 0),
                Field("budget_tokens", "tokens", int, 0),
                Field("atol", "atol", float, 0, on_eval=True),
                Field("rtol", "rtol", float, 0, on_eval=True),
                # Kernels verified at once (--verify-workers); blank: from cores and GPUs.
                Field("verify_workers", "verify", int, 1, on_eval=True, blank="auto"))
# On the check boxes' line: a build slower than this is a `timeout` verdict.
COMPILE_FIELD = Field("compile_timeout_s", "compile s", float, 1, on_eval=True)
FIELDS = SEARCH_FIELDS + LIMIT_FIELDS + (COMPILE_FIELD,)


def library() -> list[tuple[str, str]]:
    """(name, first docstring line) for each library problem, without importing torch."""
    found = []
    for path in library_paths():
        try:
            doc = ast.get_docstring(pyast.parse(path.read_text())) or ""
        except (OSError, SyntaxError, UnicodeDecodeError):
            doc = "(unreadable)"
        found.append((path.stem, doc.strip().splitlines()[0] if doc.strip() else ""))
    return found


@functools.cache
def gpu_expected() -> bool:
    """Whether nvidia-smi lists a GPU here (a driver without a usable GPU is no GPU either);
    asked once per process."""
    return bool(cuda_env.list_gpus())


def _shown(value: int | float | None) -> str:
    return "" if value is None else f"{value:g}"


def _placeholder(field: Field, default: int | float | None) -> str:
    if default is not None:
        return _shown(default)
    return field.blank or ("problem's" if field.on_eval else "none")


class ProblemPicker(ModalScreen[SessionRequest | None]):
    """Returns what to start, or None when dismissed. `llm` holds the provider, model and
    base URL to offer (remembered from the last session); `previous` refills the whole form;
    `check_llm(request)` raises ProviderError when the LLM cannot be used."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="picker.cancel"),
        Binding("ctrl+s", "start", "Start session", id="picker.start"),
    ]

    def __init__(self, llm: dict, selected: str | None = None,
                 previous: SessionRequest | None = None, message: str | None = None,
                 check_llm: Callable[[SessionRequest], None] | None = None,
                 draft: dict | None = None,
                 keep_draft: Callable[[dict], None] | None = None) -> None:
        super().__init__()
        self.llm = llm
        self.previous = previous
        self.draft = draft or {}            # what was typed when the picker was last cancelled
        self.keep_draft = keep_draft
        self.selected = previous.problem if previous else selected
        self.message = message
        self.check_llm = check_llm
        self.problems = library()
        if self.selected and self.selected not in {name for name, _ in self.problems}:
            self.problems.insert(0, (self.selected, "(not in the library)"))
        self.shown = [name for name, _ in self.problems]  # the list's names, filtered
        # Review on: in the workbench a person approves, edits or vetoes each idea.
        self.defaults = SearchSettings(review=True)
        self.defaults.eval.no_gpu = not gpu_expected()

    def _default(self, field: Field) -> int | float | None:
        return getattr(self.defaults.eval if field.on_eval else self.defaults, field.key)

    def _value(self, field: Field) -> str:
        if self.previous is None:
            return _shown(self._default(field))
        settings = self.previous.settings
        return _shown(getattr(settings.eval if field.on_eval else settings, field.key))

    def _row(self, fields: tuple[Field, ...]) -> ComposeResult:
        with Horizontal(classes="row"):
            yield from self._inputs(fields)

    def _inputs(self, fields: tuple[Field, ...]) -> ComposeResult:
        for field in fields:
            yield Label(field.label)
            yield Input(self._value(field), placeholder=_placeholder(field, self._default(field)),
                        id=field.key, compact=True)

    def compose(self) -> ComposeResult:
        previous = self.previous
        llm = ({"provider": previous.provider, "model": previous.model,
                "base_url": previous.base_url} if previous else self.llm)
        settings = previous.settings if previous else self.defaults
        with Vertical(id="dialog", classes="picker"):
            yield Label("New session: pick a problem, set the LLM and the search; ctrl+s "
                        "starts", id="dialog-title")
            with Horizontal(classes="row"):
                yield Label("problem")
                yield Input(placeholder="type to filter the list", id="filter", compact=True)
            yield OptionList(*self._options(self.shown), id="problem-list")
            with Horizontal(classes="row"):
                yield Label("provider")
                yield Input(llm.get("provider") or "", placeholder="|".join(PROVIDERS),
                            id="provider", compact=True)
                yield Label("model")
                yield Input(llm.get("model") or "", id="model", compact=True)
                yield Label("base URL")
                yield Input(llm.get("base_url") or "", placeholder="optional",
                            id="base-url", compact=True)
            yield from self._row(SEARCH_FIELDS)
            yield from self._row(LIMIT_FIELDS)
            with Horizontal(classes="row"):
                yield TickBox("review ideas", settings.review, id="review", compact=True)
                yield TickBox("no GPU (compile + guards only)", settings.eval.no_gpu,
                              id="no-gpu", compact=True)
                yield from self._inputs((COMPILE_FIELD,))
            yield Label(HINT, id="picker-message", classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def _options(self, names: list[str]) -> list[Option]:
        docs = dict(self.problems)
        return [Option(Text.assemble((name, "bold"), "  ", (docs[name], "dim")), id=name)
                for name in names]

    def on_mount(self) -> None:
        options = self.query_one("#problem-list", OptionList)
        options.highlighted = (self.shown.index(self.selected) if self.selected in self.shown
                               else 0)
        options.focus()
        for key, value in self.draft.items():
            widget = self.query_one(f"#{key}")
            widget.value = value
        if self.message:
            self._refuse(self.message, None)

    # -- the problem list: type to filter --------------------------------------------------------
    def on_key(self, event) -> None:
        options = self.query_one("#problem-list", OptionList)
        box = self.query_one("#filter", Input)
        if self.focused is options and event.character and event.character.isprintable() \
                and event.character != " ":
            # Typing on the list filters it (the filter box shows what was typed).
            box.value += event.character
            event.stop()
        elif self.focused is options and event.key == "backspace" and box.value:
            box.value = box.value[:-1]
            event.stop()
        elif self.focused is box and event.key in ("down", "up"):
            options.action_cursor_down() if event.key == "down" else options.action_cursor_up()
            event.stop()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        text = event.value.strip().lower()
        names = [name for name, doc in self.problems
                 if text in name.lower() or text in doc.lower()]
        options = self.query_one("#problem-list", OptionList)
        current = self.shown[options.highlighted] if options.highlighted is not None \
            and options.highlighted < len(self.shown) else None
        self.shown = names
        options.clear_options()
        options.add_options(self._options(names))
        if names:
            options.highlighted = names.index(current) if current in names else 0

    def on_option_list_option_selected(self) -> None:
        # Enter on a problem moves on to the LLM fields (or starts if they are filled in).
        self._next_field()

    def _next_field(self) -> None:
        provider, model = self.query_one("#provider", Input), self.query_one("#model", Input)
        if provider.value and model.value:
            self.action_start()
        else:
            (model if provider.value else provider).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._next_field() if event.input.id == "filter" else self.action_start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_start() if event.button.id == "start" else self.action_cancel()

    def _refuse(self, text: str, box: Input | None) -> None:
        """Say what is wrong under the form, and put the cursor where it is."""
        self.query("Input.-invalid").remove_class("-invalid")
        if box is not None:
            box.add_class("-invalid")
            box.focus()
        message = self.query_one("#picker-message", Label)
        message.update(text)
        message.set_classes("error")  # Label's error variant

    def _settings(self) -> SearchSettings | None:
        """The form's settings, or None after saying (in place) which value is wrong."""
        settings = SearchSettings(review=self.query_one("#review", TickBox).value)
        settings.eval.no_gpu = self.query_one("#no-gpu", TickBox).value
        self.query("Input.-invalid").remove_class("-invalid")
        for field in FIELDS:
            box = self.query_one(f"#{field.key}", Input)
            target = settings.eval if field.on_eval else settings
            try:
                setattr(target, field.key, field.parse(box.value, self._default(field)))
            except ValueError as e:
                self._refuse(str(e), box)
                return None
        return settings

    def _provider(self) -> str | None:
        box = self.query_one("#provider", Input)
        name = box.value.strip()
        if name in PROVIDERS:
            return name
        self._refuse(f"provider: {name!r} is not one of {', '.join(PROVIDERS)}" if name
                     else f"provider: choose one of {', '.join(PROVIDERS)}", box)
        return None

    def action_start(self) -> None:
        from workbench.llm.errors import ProviderError

        options = self.query_one("#problem-list", OptionList)
        if options.highlighted is None or not self.shown:
            self._refuse("pick a problem first (the filter matches none)",
                         self.query_one("#filter", Input))
            return
        provider = self._provider()
        model = self.query_one("#model", Input)
        if provider and not model.value.strip():
            self._refuse(f"model: {provider} needs a model name", model)
            return
        settings = self._settings() if provider else None
        if settings is None:
            return
        request = SessionRequest(
            problem=self.shown[options.highlighted], provider=provider,
            model=model.value.strip(),
            base_url=self.query_one("#base-url", Input).value.strip() or None,
            settings=settings)
        try:
            if self.check_llm is not None:
                self.check_llm(request)
        except ProviderError as e:
            self._refuse(str(e), self.query_one("#provider", Input))
            return
        self.dismiss(request)

    def action_cancel(self) -> None:
        # Escape is not "forget what I typed": the next picker starts from it.
        if self.keep_draft is not None:
            self.keep_draft({widget.id: widget.value for widget in self.query("Input, Checkbox")
                             if widget.id != "filter"})
        self.dismiss(None)
