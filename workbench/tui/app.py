"""The Textual app: themes, keymap and config; background work; the main screen.

Presentation only. Reads come from workbench.tui.queries; changes go through workbench.control,
the search engine and workbench.export, exactly what the headless `run` uses.
"""
from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.worker import get_current_worker

from workbench.llm.errors import ProviderError
from workbench.store import Store
from workbench.tui import queries
from workbench.tui.commands import WorkbenchCommands
from workbench.tui.config import Config, load_config
from workbench.user_dirs import config_file
from workbench.tui.engine_bridge import EngineBridge, EngineEvent, WorkFinished, one_line
from workbench.tui.main_screen import MainScreen
from workbench.tui.modals import ConfirmScreen, HelpScreen
from workbench.tui.picker import ProblemPicker, SessionRequest
from workbench.tui.tree import KernelTree


class WorkbenchApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "kernel-workbench"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark,f1", "help", "Help", id="help"),
        Binding("ctrl+p", "command_palette", "Palette", id="palette",
                tooltip="Every action by name, with its key"),
        Binding("T", "next_theme", "Theme", id="theme", tooltip="Cycle through the themes"),
    ]

    def __init__(self, store: Store, problem: str | None = None,
                 provider_factory: Callable[[dict], Any] | None = None,
                 executor_factory: Callable[[], Any] | None = None,
                 config: Config | None = None) -> None:
        super().__init__()
        self.store = store
        self.problem = problem
        self.config = config or load_config()
        self.keymap: dict[str, str] = dict(self.config.keymap)
        self.bridge = EngineBridge(store, self.post_message, provider_factory, executor_factory)
        self.main_screen = MainScreen(store, self.bridge)
        self.started = False  # the start-up selection (or the picker) has been made
        self._pending_request: SessionRequest | None = None
        self._picker_draft: dict = {}   # the picker's fields when it was last cancelled

    def on_mount(self) -> None:
        for theme in self.config.themes:
            self.register_theme(theme)
        if self.config.theme in self.available_themes:
            self.theme = self.config.theme
        else:
            self.config.problems.append(f"theme {self.config.theme!r} is not installed; "
                                        f"themes: {', '.join(self._our_themes())}")
            self.theme = ("workbench-dark" if "workbench-dark" in self.available_themes
                          else "textual-dark")
        self.set_keymap(self.keymap)
        self.push_screen(self.main_screen)
        for problem in self.config.problems:
            self.notify(problem, severity="warning", timeout=10)
        self.call_after_refresh(self._open_start)

    def _open_start(self) -> None:
        """Show the problem asked for (or the latest session); with none, the picker."""
        # Start-up objects (widgets, styles, lexers) live as long as the app: keep them out of
        # the collector's full passes, which otherwise pause keypresses by 30-60 ms.
        gc.freeze()
        store = self.store
        if self.problem:
            row = queries.problem_by_name(store, self.problem)
            session = queries.latest_session(store, row["id"]) if row else None
            if session is None:
                self.started = True
                self.action_new_session(selected=self.problem)
                return
        else:
            session = queries.latest_session(store)
            if session is None:
                self.started = True
                self.action_new_session()
                return
        self.main_screen.reveal_session(session["id"])
        self.started = True
        pending = queries.unevaluated_kernels(store, session["id"])
        if pending:
            self.notify(f"session {session['id']}: {len(pending)} kernel(s) have no verdict "
                        "(in flight when last closed?); select the session and press R to "
                        "compile and time them", severity="warning", timeout=6)

    def _our_themes(self) -> list[str]:
        return [t.name for t in self.config.themes]

    # -- background work ---------------------------------------------------------------------
    def run_in_thread(self, label: str, work: Callable[[], Any], session_id: int | None) -> None:
        """Run `work` in a thread worker; its outcome arrives as a WorkFinished message."""

        def run() -> None:
            try:
                result = work()
            except Exception as e:  # noqa: BLE001 - worker failures become one line
                self.post_message(WorkFinished(label, one_line(e), session_id=session_id))
                return
            if not get_current_worker().is_cancelled:
                self.post_message(WorkFinished(label, None, result, session_id=session_id))

        self.run_worker(run, name=label, group="work", thread=True, exit_on_error=False)

    def on_engine_event(self, message: EngineEvent) -> None:
        self.main_screen.apply_event(message.event)

    def on_work_finished(self, message: WorkFinished) -> None:
        result = message.result
        if message.label == "new session" and message.error is not None:
            # Nothing typed is lost: the picker comes back as it was, saying what failed.
            self.open_picker(previous=self._pending_request, message=message.error)
            return
        if message.label == "new session":
            self.main_screen.reveal_session(result)
            self.notify(f"session {result} started: n asks the LLM for ideas, g runs a "
                        "whole round")
        elif message.label.startswith("export") and message.error is None:
            self.notify(f"exported k{result.kernel_id} to {result.out_dir}"
                        + (f" ({result.notes[0]})" if result.notes else ""), timeout=8)
        self.main_screen.work_finished(message.session_id, message.label, message.error)

    # -- actions -------------------------------------------------------------------------------
    def _llm_defaults(self) -> dict:
        """Provider, model and base URL to offer: the latest session's, else the config's."""
        try:
            from workbench.llm import load_config as llm_config

            llm = llm_config()
        except ProviderError as e:
            self.notify(str(e), severity="warning")
            llm = {}
        latest = queries.latest_session(self.store)
        if latest and latest["provider"]:
            llm = {"provider": latest["provider"], "model": latest["model"],
                   "base_url": latest["base_url"]}
        return llm

    def action_new_session(self, problem_id: int | None = None, selected: str | None = None,
                           ) -> None:
        if selected is None and problem_id is not None:
            row = self.store.rows("problems", "id = ?", [problem_id])
            selected = row[0]["name"] if row else None
        self.open_picker(selected=selected)

    def open_picker(self, selected: str | None = None, previous: SessionRequest | None = None,
                    message: str | None = None) -> None:
        factory = self.bridge.provider_factory

        def check_llm(request: SessionRequest) -> None:
            # A missing key or a bad provider is refused in the picker, before torch loads.
            factory({"provider": request.provider or None, "model": request.model or None,
                     "base_url": request.base_url})

        def keep(draft: dict) -> None:
            self._picker_draft = draft

        self.push_screen(ProblemPicker(self._llm_defaults(), selected, previous, message,
                                       check_llm, self._picker_draft, keep),
                         self._start_session)

    def _start_session(self, request: SessionRequest | None) -> None:
        if request is None:
            return
        self._picker_draft = {}
        store = self.store

        def start() -> int:
            from workbench.problems import load_problem
            from workbench.search import new_session

            problem = load_problem(request.problem)
            return new_session(store, problem, request.provider, request.model,
                               request.base_url, request.settings)

        self.notify(f"starting a session on {request.problem}…", timeout=3)
        self._pending_request = request
        self.run_in_thread("new session", start, None)

    def key_for(self, binding: Binding) -> str:
        """How the binding's keys (after the user's keymap) are shown: `/`, `^x`, `j/↓`."""
        keys = self.keymap.get(binding.id, binding.key).split(",")
        return "/".join(self.get_key_display(binding.with_key(key.strip())) for key in keys)

    def action_help(self) -> None:
        rows = [(self.key_for(binding), binding.description, binding.id)
                for bindings in (KernelTree.BINDINGS, self.main_screen.BINDINGS, self.BINDINGS)
                for binding in bindings]
        self.push_screen(HelpScreen(rows, str(config_file())))

    def action_next_theme(self) -> None:
        names = self._our_themes() or [self.theme]
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def watch_theme(self) -> None:
        # The CUDA pane picks its Pygments style from the theme's darkness.
        if self.main_screen.is_mounted:
            self.main_screen.show_selection(source=True)

    def action_quit(self) -> None:
        """Quit; with work in flight, ask first (that work is lost or must be redone)."""
        screen = self.main_screen
        if not (screen.busy or screen.in_flight):
            self._quit(True)
            return
        work = ", ".join(screen.busy.values()) or "verification"
        text = (f"In flight: {work}; {len(screen.in_flight)} kernel(s) being compiled or "
                "timed.\nQuitting stops them: they get no verdict, and R (or --resume) "
                "verifies them next time. Answers of LLM calls in flight are lost.")
        self.push_screen(ConfirmScreen("Quit while work is running?", text, "Quit", "Stay"),
                         self._quit)

    def _quit(self, go: bool | None) -> None:
        if go:
            self.bridge.shutdown()
            self.exit()
