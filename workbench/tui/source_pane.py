"""The CUDA pane: a kernel's CUDA/C++ (as load_inline saw it), its Python file, or its diff."""
from __future__ import annotations

from pygments.lexers.c_like import CudaLexer
from rich.syntax import Syntax
from textual.containers import ScrollableContainer
from textual.reactive import reactive
from textual.widgets import Static

from workbench.store import Store
from workbench.tui import queries, sources

MODES = ("cuda", "python")


class SourcePane(ScrollableContainer, can_focus=True):
    """Shows one kernel; `mode` toggles CUDA/Python and `diff` toggles the diff to its parent."""

    mode: reactive[str] = reactive("cuda")
    diff: reactive[bool] = reactive(False)

    def __init__(self, store: Store, **kwargs) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.kernel_id: int | None = None
        self.shown = ""  # the text on display, plain (what a test or a copy wants)
        self._placeholder = "Select a kernel in the tree."

    def compose(self):
        yield Static(self._placeholder, id="source-text")

    def show_kernel(self, kernel_id: int | None, placeholder: str = "") -> None:
        self.kernel_id = kernel_id
        self._placeholder = placeholder or "Select a kernel in the tree."
        self._render_source()
        self.scroll_home(animate=False)

    def watch_mode(self) -> None:
        self._render_source()

    def watch_diff(self) -> None:
        self._render_source()

    def _theme(self) -> str:
        return "monokai" if self.app.current_theme.dark else "default"

    def _cuda(self, kernel_id: int, source: str) -> str:
        return sources.cuda_view(source, queries.build_extensions(self.store, kernel_id)) or ""

    def _render_source(self) -> None:
        if not self.is_mounted:
            return
        text = self.query_one("#source-text", Static)
        kernel_id = self.kernel_id
        row = queries.kernel(self.store, kernel_id) if kernel_id is not None else None
        if row is None:
            self.border_title = "source"
            self.shown = self._placeholder
            text.update(self._placeholder)
            return
        what = "CUDA" if self.mode == "cuda" else "Python"
        body = self._cuda(kernel_id, row["source"]) if self.mode == "cuda" else row["source"]
        if self.mode == "cuda" and not body:
            body, what = row["source"], "Python (no CUDA strings found)"
        if self.diff:
            parent = queries.kernel(self.store, row["parent_id"]) if row["parent_id"] else None
            if parent is None:
                self.border_title = f"k{kernel_id} · {what} · no parent to diff against"
                self.shown = body
                text.update(Syntax(body, self._lexer(), theme=self._theme(), line_numbers=True))
                return
            before = (self._cuda(parent["id"], parent["source"]) if self.mode == "cuda"
                      else parent["source"])
            patch = sources.unified_diff(before, body, f"k{parent['id']}", f"k{kernel_id}")
            self.border_title = f"k{kernel_id} · {what} · diff vs k{parent['id']}"
            self.shown = patch or "(identical)"
            text.update(Syntax(patch or "(identical)", "diff", theme=self._theme()))
            return
        self.border_title = f"k{kernel_id} · {what}"
        self.shown = body
        text.update(Syntax(body, self._lexer() if "CUDA" == what else "python",
                           theme=self._theme(), line_numbers=True))

    def _lexer(self):
        return CudaLexer() if self.mode == "cuda" else "python"
