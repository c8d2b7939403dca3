"""The benchmark table: every kernel of the selected round or idea, sortable by any column."""
from __future__ import annotations

import json

from rich.text import Text
from textual.widgets import DataTable

from workbench.tui import glyphs

# (key, label, width): fixed widths, so rows paint without re-measuring every column.
COLUMNS = (("kernel", "kernel", 7), ("status", "status", 15), ("ms", "ms", 8),
           ("ci95", "±CI95", 6), ("eager", "×eager", 6), ("compile", "×compile", 8),
           ("floor", "%floor", 6), ("flags", "flags", 24))


def _num(value: float | None, fmt: str) -> Text:
    return Text("-" if value is None else format(value, fmt), justify="right")


def flags_text(row: dict) -> str:
    """The flags column: verdict flags, and what the engineer did to the kernel."""
    try:
        kinds = [f.get("kind", "?") for f in json.loads(row.get("flags") or "[]")]
    except (TypeError, ValueError):
        kinds = []
    if row.get("pinned"):
        kinds.insert(0, "pinned")
    if row.get("pruned"):
        kinds.insert(0, "pruned")
    if row.get("cleared"):
        kinds.append("cleared")
    if row.get("time_ms") is not None and row.get("speedup_compile") is None:
        kinds.append("no-compile-baseline")   # timed against eager only (the report says why)
    if row.get("reused_from"):   # same source verified before: a copy, not a new measurement
        kinds.append(f"reused(e{row['reused_from']})")
    return ",".join(kinds)


class BenchTable(DataTable):
    """Rows are kernels; row keys are kernel ids. Click a header (or press the sort key) to sort."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.sort_column: str | None = None
        self.sort_reverse = False
        self._values: dict[str, dict[str, object]] = {}  # row key -> column key -> sort value
        self._signature: tuple | None = None

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show_rows(self, rows: list[dict], in_flight: set[int], best_id: int | None,
                  title: str) -> None:
        signature = (title, best_id, tuple(
            (r["id"], r.get("status"), r.get("time_ms"), r.get("pruned"), r.get("pinned"),
             r.get("cleared"), r["id"] in in_flight) for r in rows))
        if signature == self._signature:
            return  # moving between kernels of one idea: same rows, keep the table as it is
        self._signature = signature
        self.border_title = title
        self.clear()
        self._values.clear()
        for row in rows:
            state = glyphs.kernel_state(row, in_flight, best_id)
            glyph, style = glyphs.KERNEL_STATES[state]
            time_ms, lo, hi = row.get("time_ms"), row.get("ci95_lo_ms"), row.get("ci95_hi_ms")
            floor = (100 * row["floor_ms"] / time_ms
                     if row.get("floor_ms") and time_ms else None)
            # The 95% CI as ± half its width, relative to the median: compact, comparable.
            ci_rel = (50 * (hi - lo) / time_ms if lo is not None and hi is not None and time_ms
                      else None)
            status = glyphs.status_text(row, state)
            key = str(row["id"])
            self._values[key] = {"kernel": row["id"], "status": status, "ms": time_ms,
                                 "ci95": ci_rel, "eager": row.get("speedup_eager"),
                                 "compile": row.get("speedup_compile"), "floor": floor,
                                 "flags": flags_text(row)}
            self.add_row(f"k{row['id']}", Text(f"{glyph} {status}", style),
                         _num(time_ms, ".4f"),
                         Text("-" if ci_rel is None else f"±{ci_rel:.1f}%", justify="right"),
                         _num(row.get("speedup_eager"), ".2f"),
                         _num(row.get("speedup_compile"), ".2f"), _num(floor, ".0f"),
                         flags_text(row), key=key)
        if self.sort_column:
            self._apply_sort()

    def sort_by(self, column: str) -> None:
        """Sort by `column`; sorting by the same column again reverses the order."""
        self.sort_reverse = (not self.sort_reverse) if column == self.sort_column else (
            column in ("eager", "compile", "floor"))  # bigger is better: best first
        self.sort_column = column
        self._apply_sort()

    def next_sort(self) -> str:
        keys = [k for k, _, _ in COLUMNS]
        column = keys[(keys.index(self.sort_column) + 1) % len(keys)] if self.sort_column \
            else "eager"
        self.sort_by(column)
        return next(label for key, label, _ in COLUMNS if key == column)

    def _apply_sort(self) -> None:
        column, values, reverse = self.sort_column, self._values, self.sort_reverse

        def key(kernel_cell: str) -> tuple:
            value = values.get(kernel_cell[1:], {}).get(column)
            # Missing values sort last whichever way the order goes.
            return (value is None) != reverse, 0 if value is None else value

        self.sort("kernel", key=key, reverse=reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(event.column_key.value)
