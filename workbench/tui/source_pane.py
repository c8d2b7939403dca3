"""The CUDA pane: a kernel's CUDA/C++ (as load_inline saw it), its Python file, or its diff.

Rendered once per selection into strips and drawn with Textual's line API (a ScrollView), so
moving through the tree repaints only this pane instead of re-laying out the screen.
"""
from __future__ import annotations

from pygments.lexers.c_like import CudaLexer
from rich.console import RenderableType
from rich.segment import Segment
from rich.syntax import Syntax
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workbench.store import Store
from workbench.tui import queries, sources


class SourcePane(ScrollView, can_focus=True):
    """Shows one kernel; `mode` toggles CUDA/Python and `diff` toggles the diff to its parent."""

    mode: reactive[str] = reactive("cuda")
    diff: reactive[bool] = reactive(False)

    def __init__(self, store: Store, **kwargs) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.kernel_id: int | None = None
        self.shown = ""  # the text on display, plain (what a test or a copy wants)
        self._placeholder = "Select a kernel in the tree."
        self._strips: list[Strip] = []
        # Highlighted sources recently shown: going back to a kernel costs no re-highlighting.
        self._cache: dict[tuple, list[Strip]] = {}

    def on_mount(self) -> None:
        self._render_source()

    def show_kernel(self, kernel_id: int | None, placeholder: str = "") -> None:
        self.kernel_id = kernel_id
        self._placeholder = placeholder or "Select a kernel in the tree."
        self._render_source()
        self.scroll_to(0, 0, animate=False)

    def watch_mode(self) -> None:
        self._render_source()

    def watch_diff(self) -> None:
        self._render_source()

    def _cuda(self, kernel_id: int, source: str) -> str:
        return sources.cuda_view(source, queries.build_extensions(self.store, kernel_id)) or ""

    def _syntax(self, code: str, lexer) -> Syntax:
        # Pygments style follows the theme's darkness; the background stays the app's own.
        return Syntax(code, lexer, theme="monokai" if self.app.current_theme.dark else "default",
                      line_numbers=lexer != "diff", background_color="default",
                      word_wrap=False)

    def _render_source(self) -> None:
        if not self.is_mounted:
            return
        kernel_id = self.kernel_id
        row = queries.kernel(self.store, kernel_id) if kernel_id is not None else None
        if row is None:
            self.border_title = "source"
            self._show(self._placeholder, Text(self._placeholder, "italic"))
            return
        what = "CUDA" if self.mode == "cuda" else "Python"
        body = self._cuda(kernel_id, row["source"]) if self.mode == "cuda" else row["source"]
        lexer = CudaLexer() if self.mode == "cuda" else "python"
        if self.mode == "cuda" and not body:
            body, what, lexer = row["source"], "Python (no CUDA strings found)", "python"
        parent = (queries.kernel(self.store, row["parent_id"])
                  if self.diff and row["parent_id"] else None)
        if self.diff and parent is not None:
            before = (self._cuda(parent["id"], parent["source"]) if self.mode == "cuda"
                      else parent["source"])
            patch = sources.unified_diff(before, body, f"k{parent['id']}", f"k{kernel_id}")
            self.border_title = f"k{kernel_id} · {what} · diff vs k{parent['id']}"
            self._show(patch or "(identical)", self._syntax(patch or "(identical)", "diff"))
            return
        suffix = " · no parent to diff against" if self.diff else ""
        self.border_title = f"k{kernel_id} · {what}{suffix}"
        self._show(body, self._syntax(body, lexer))

    def _show(self, plain: str, renderable: RenderableType) -> None:
        self.shown = plain
        width = max((len(line) for line in plain.splitlines()), default=0) + 8
        key = (plain, self.border_title, self.app.current_theme.dark)
        strips = self._cache.pop(key, None)
        if strips is None:
            console = self.app.console
            options = console.options.update(width=width, height=None, no_wrap=True)
            lines = console.render_lines(renderable, options, pad=False)
            strips = [Strip(Segment.adjust_line_length(line, width)) for line in lines]
        self._cache[key] = strips  # most recently shown last
        while len(self._cache) > 64:
            self._cache.pop(next(iter(self._cache)))
        self._strips = strips
        self.virtual_size = Size(width, len(strips))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = y + scroll_y
        width = self.scrollable_content_region.width
        if index >= len(self._strips):
            return Strip.blank(width, self.rich_style)
        return self._strips[index].crop_extend(scroll_x, scroll_x + width, self.rich_style)
