"""The selected idea's text (or a summary of the selected round, session or problem)."""
from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from workbench.tui import glyphs


class IdeaPane(VerticalScroll):
    def compose(self):
        yield Static("", id="idea-text")

    def show_idea(self, idea: dict) -> None:
        glyph, style = glyphs.IDEA_STATES.get(idea["status"], ("?", ""))
        head = Text.assemble((f"{glyph} {idea['status']}", style),
                             f" · idea {idea['id']} · round {idea['round_n']} · by {idea['author']}")
        if idea.get("seed_kernel_id"):
            head.append(f" · seed k{idea['seed_kernel_id']}")
        self.border_title = "idea"
        self.query_one("#idea-text", Static).update(Text.assemble(head, "\n", idea["text"]))
        self.scroll_home(animate=False)

    def show_text(self, title: str, text: str | Text) -> None:
        self.border_title = title
        self.query_one("#idea-text", Static).update(text)
