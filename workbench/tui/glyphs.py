"""Status glyphs and labels: how a kernel's or an idea's state reads at a glance.

Glyphs are single-cell BMP characters (no emoji) so columns line up in tmux and over SSH; each
state also has its own colour, and the glyph alone still tells states apart in 256 colours.
"""
from __future__ import annotations

from rich.text import Text

# state -> (glyph, style). Styles use theme-independent ANSI-safe colours.
KERNEL_STATES: dict[str, tuple[str, str]] = {
    "proposed": ("○", "dim"),
    "compiling": ("◐", "bold cyan"),
    "incorrect": ("✗", "red"),
    "correct": ("●", "green"),
    "flagged": ("⚑", "bold yellow"),
    "untrusted": ("‼", "bold red"),     # a verdict the verifier did not seal
    "unverified": ("◇", "blue"),
    "best": ("★", "bold green"),
    "pruned": ("✂", "dim"),
    "duplicate": ("=", "dim"),
}
IDEA_STATES: dict[str, tuple[str, str]] = {
    "proposed": ("?", "yellow"),
    "approved": ("✓", "green"),
    "edited": ("✎", "cyan"),
    "vetoed": ("⊘", "dim red"),
    "implemented": ("●", "green"),
}
PIN = ("◆", "bold magenta")
FAILED = {"compile_error", "incorrect", "timeout", "crashed"}


def kernel_state(row: dict, in_flight: set[int], best_id: int | None) -> str:
    """The display state of a kernel row from queries (latest verdict + flags + work in flight)."""
    if row["id"] in in_flight:
        return "compiling"
    if row.get("pruned"):
        return "pruned"
    if row.get("duplicate_of"):
        return "duplicate"
    if row["id"] == best_id:
        return "best"
    status = row.get("status")
    if status is None:
        return "proposed"
    if status in FAILED:
        return "incorrect"
    if status == "untrusted":
        return "untrusted"
    if status == "correct" or (status == "flagged" and row.get("cleared")):
        return "correct"
    return status if status in KERNEL_STATES else "incorrect"


def status_text(row: dict, state: str) -> str:
    """The word for a kernel's status; tree and table say the same: work in flight beats a
    stored verdict (a kernel being verified again is running, not still crashed)."""
    if state == "compiling":
        return "running"
    return (row.get("status") or "pending").replace("_", " ")


def speedup(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def kernel_label(row: dict, in_flight: set[int], best_id: int | None) -> Text:
    state = kernel_state(row, in_flight, best_id)
    glyph, style = KERNEL_STATES[state]
    label = Text.assemble((glyph, style), " ", (f"k{row['id']}", "dim" if state == "pruned" else ""))
    if row.get("pinned"):
        label.append(" ")
        label.append(*PIN)
    detail = (speedup(row.get("speedup_eager"))
              if row.get("speedup_eager") is not None and state != "compiling"
              else status_text(row, state) if row.get("status") or state == "compiling"
              else "")
    if state == "untrusted":
        detail = "untrusted verdict"
    elif state == "duplicate":
        detail = f"same as k{row['duplicate_of']}"
    if detail:
        label.append(f" {detail}", style if state != "correct" else "")
    return label


def idea_label(row: dict, width: int = 40) -> Text:
    glyph, style = IDEA_STATES.get(row["status"], ("?", ""))
    text = " ".join(row["text"].split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    label = Text.assemble((glyph, style), " ")
    label.append(text, "dim strike" if row["status"] == "vetoed" else "")
    if row.get("author") == "human":
        label.append(" (you)", "italic dim")
    if row.get("echoes"):
        label.append(f" (+{row['echoes']} restated)", "italic dim")
    return label


def round_label(row: dict, state: str = "") -> Text:
    """`state`: what the round is doing now (ideating, implementing), or "" when idle."""
    label = Text(f"round {row['n']}")
    if state:
        label.append(f" {state}", "italic cyan")
    if row.get("best") is not None:
        label.append(f" best {row['best']:.2f}x", "green")
    return label


def session_label(row: dict) -> Text:
    model = row.get("model") or row.get("provider") or "?"
    label = Text(f"session {row['id']} ")
    label.append(model, "italic")
    if row.get("status") and row["status"] != "stopped":
        label.append(f" {row['status']}", "cyan")
    return label
