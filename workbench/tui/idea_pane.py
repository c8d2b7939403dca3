"""The selected idea's text (or a summary of the selected round, session or problem).

Fixed height and rendered directly, so a new selection repaints the pane without a screen
layout; `z` (zoom) shows a long idea in full.
"""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from workbench.tui import glyphs


class IdeaPane(Widget, can_focus=True):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.content = Text()

    def render(self) -> Text:
        return self.content

    def _set(self, title: str, text: Text) -> None:
        self.border_title = title
        self.content = text
        self.refresh()

    def show_idea(self, idea: dict) -> None:
        glyph, style = glyphs.IDEA_STATES.get(idea["status"], ("?", ""))
        head = Text.assemble((f"{glyph} {idea['status']}", style),
                             f" · idea {idea['id']} · round {idea['round_n']} · by {idea['author']}")
        if idea.get("seed_kernel_id"):
            head.append(f" · seed k{idea['seed_kernel_id']}")
        self._set("idea", Text.assemble(head, "\n", idea["text"]))

    def show_text(self, title: str, text: str | Text) -> None:
        self._set(title, text if isinstance(text, Text) else Text(text))
