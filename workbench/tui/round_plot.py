"""Best speedup vs eager per round, as one line of bars: is the search still improving?"""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"


def bars(best: list[float | None]) -> Text:
    """One cell per round: bar height is the round's best relative to the session's best."""
    top = max((b for b in best if b is not None), default=None)
    text = Text()
    for value in best:
        if value is None or not top:
            text.append("·", "dim")
        else:
            level = min(len(BARS) - 1, int(value / top * (len(BARS) - 1) + 0.5))
            text.append(BARS[level], "green" if value >= 1 else "yellow")
    return text


class RoundPlot(Widget):
    """One rendered line: updates repaint it without a screen layout."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.content = Text()

    def render(self) -> Text:
        return self.content

    def show(self, rounds: list[tuple[int, float | None]]) -> None:
        """`rounds`: (round number, best speedup vs eager or None) in order."""
        if not rounds:
            self.content = Text("best/round  (no rounds yet)", "dim")
        else:
            best = [b for _, b in rounds]
            line = Text("best/round ", "dim", no_wrap=True, overflow="ellipsis")
            line.append_text(bars(best[-40:]))  # the newest rounds fit at 80 columns
            top = max((b for b in best if b is not None), default=None)
            n, last = rounds[-1]
            line.append(f" r{n} {'-' if last is None else f'{last:.2f}x'}")
            if top is not None and top != last:
                line.append(f" max {top:.2f}x", "bold")
            self.content = line
        self.refresh()
