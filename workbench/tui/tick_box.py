"""A checkbox whose state reads without colour: `[x]` on, `[ ]` off.

Textual's draws `▐X▌` in both states, told apart only by colour (233 on 236 when off in 256
colours): the state could not be read over SSH or in tmux.
"""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Checkbox


class TickBox(Checkbox):
    @property
    def _button(self) -> Content:
        style = self.get_visual_style("toggle--button")
        return Content.assemble("[", ("x" if self.value else " ", style), "]")
