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
from workbench.tui.config import Config, config_dir, load_config
from workbench.tui.engine_bridge import EngineBridge, EngineEvent, WorkFinished, one_line
from workbench.tui.main_screen import MainScreen
from workbench.tui.modals import HelpScreen
from workbench.tui.picker import ProblemPicker, SessionRequest


class WorkbenchApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "kernel-workbench"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark,f1", "help", "Help", id="help"),
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
        if message.label == "new session" and message.error is None:
            self.main_screen.reveal_session(result)
            self.notify(f"session {result} started: n asks the LLM for ideas, g runs a "
                        "whole round")
        elif message.label.startswith("export") and message.error is None:
            self.notify(f"exported k{result.kernel_id} to {result.out_dir}"
                        + (f" ({result.notes[0]})" if result.notes else ""), timeout=8)
        self.main_screen.work_finished(message.session_id, message.label, message.error)

    # -- actions -------------------------------------------------------------------------------
    def action_new_session(self, problem_id: int | None = None, selected: str | None = None,
                           ) -> None:
        if selected is None and problem_id is not None:
            row = self.store.rows("problems", "id = ?", [problem_id])
            selected = row[0]["name"] if row else None
        try:
            from workbench.llm import load_config as llm_config

            llm = llm_config()
        except ProviderError as e:
            self.notify(str(e), severity="warning")
            llm = {}
        self.push_screen(ProblemPicker(llm, selected), self._start_session)

    def _start_session(self, request: SessionRequest | None) -> None:
        if request is None:
            return
        store, factory = self.store, self.bridge.provider_factory

        def start() -> int:
            from workbench.problems import load_problem
            from workbench.search import new_session

            # Check the provider first: a missing key is one line, before torch loads.
            factory({"provider": request.provider or None, "model": request.model or None,
                     "base_url": request.base_url})
            problem = load_problem(request.problem)
            return new_session(store, problem, request.provider, request.model,
                               request.base_url, request.settings)

        self.notify(f"starting a session on {request.problem}…", timeout=3)
        self.run_in_thread("new session", start, None)

    def key_for(self, binding: Binding) -> str:
        """How the binding's first key (after the user's keymap) is shown: `/`, `^x`, `?`."""
        key = self.keymap.get(binding.id, binding.key).split(",")[0].strip()
        return self.get_key_display(binding.with_key(key))

    def action_help(self) -> None:
        rows = [(self.key_for(binding), binding.description, binding.id)
                for bindings in (self.main_screen.BINDINGS, self.BINDINGS)
                for binding in bindings]
        self.push_screen(HelpScreen(rows, str(config_dir() / "config.toml")))

    def action_next_theme(self) -> None:
        names = self._our_themes() or [self.theme]
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def watch_theme(self) -> None:
        # The CUDA pane picks its Pygments style from the theme's darkness.
        if self.main_screen.is_mounted:
            self.main_screen.show_selection(source=True)

    async def action_quit(self) -> None:
        self.bridge.shutdown()
        self.exit()
