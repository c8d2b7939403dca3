"""One line at the bottom: why the last key could not act (first, so it fits), session, LLM
cost and tokens, work in flight, latest progress."""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class StatusLine(Widget):
    """Rendered text of fixed height: updates repaint this line only, never the layout."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.content = Text()

    def render(self) -> Text:
        return self.content

    def show(self, session: dict | None, cost: dict, in_flight: int, busy: list[str],
             progress: str, hint: str = "") -> None:
        line = Text(no_wrap=True, overflow="ellipsis")
        if hint:
            line.append(hint, "bold yellow")
            line.append(" · ")
        if session:
            line.append(f"s{session['id']} {session['problem']}", "bold")
            line.append(f" · ${cost.get('cost_usd', 0.0):.3f}"
                        f" · {_tokens(cost.get('tokens_in', 0) + cost.get('tokens_out', 0))} tok")
        else:
            line.append("no session", "dim")
        line.append(" · GPU queue ")
        line.append(str(in_flight), "bold cyan" if in_flight else "dim")
        if busy:
            line.append(" · " + ", ".join(busy), "italic cyan")
        if progress:
            line.append(" · " + progress, "dim")
        if line.plain != self.content.plain:
            self.content = line
            self.refresh()
