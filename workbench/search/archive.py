"""The quality-diversity archive the next round's seeds come from (MAP-Elites style).

A kernel's cell is its optimisation kind (its idea's) × a technique signature read from its
code (tensor cores, shared-memory tiling, vectorised access, warp-level reductions, async
copies, half precision). Each cell keeps its fastest kernel; kernels whose 95% confidence
intervals overlap are ties and the older keeps its place, so noise never reshuffles seeds. A
correct kernel in a new cell stays in the archive however slow: a stepping stone.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.techniques import SHORT, TECHNIQUES, signature  # noqa: F401 - re-exported

@dataclass(frozen=True)
class Entry:
    kernel_id: int
    kind: str
    techniques: tuple[str, ...]
    time_ms: float | None
    ci_lo: float | None
    ci_hi: float | None

    @property
    def cell(self) -> tuple[str, tuple[str, ...]]:
        return self.kind, self.techniques

    @property
    def cell_label(self) -> str:
        return f"{self.kind} × {'+'.join(SHORT[t] for t in self.techniques) or 'plain'}"


def tie(a: Entry, b: Entry) -> bool:
    """Within each other's 95% CI (a kernel without a CI is the point at its median)."""
    if a.time_ms is None or b.time_ms is None:
        return a.time_ms is None and b.time_ms is None
    a_lo, a_hi = a.ci_lo if a.ci_lo is not None else a.time_ms, \
        a.ci_hi if a.ci_hi is not None else a.time_ms
    b_lo, b_hi = b.ci_lo if b.ci_lo is not None else b.time_ms, \
        b.ci_hi if b.ci_hi is not None else b.time_ms
    return a_lo <= b_hi and b_lo <= a_hi


def beats(a: Entry, b: Entry) -> bool:
    """a is faster than b beyond the noise (an untimed kernel beats nothing)."""
    if a.time_ms is None:
        return False
    if b.time_ms is None:
        return True
    return a.time_ms < b.time_ms and not tie(a, b)


def elites(entries: list[Entry]) -> list[Entry]:
    """The best kernel of each cell, fastest first. Entries are visited oldest first, so a
    newer kernel takes a cell only by beating its holder beyond the CI."""
    cells: dict[tuple, Entry] = {}
    for entry in sorted(entries, key=lambda e: e.kernel_id):
        held = cells.get(entry.cell)
        if held is None or beats(entry, held):
            cells[entry.cell] = entry
    return sorted(cells.values(), key=_speed_order)


def _speed_order(e: Entry) -> tuple:
    return (e.time_ms is None, e.time_ms or 0.0, e.kernel_id)


@dataclass(frozen=True)
class Seed:
    kernel_id: int
    cell: str
    reason: str

    def to_dict(self) -> dict:
        return {"kernel_id": self.kernel_id, "cell": self.cell, "reason": self.reason}


def choose(entries: list[Entry], k: int, seeded_before: set[int]) -> list[Seed]:
    """Up to k seeds across cells: the fastest kernel (an older one tied with it within the
    CI keeps the place), then elites of cells whose techniques no chosen seed has, then other
    elites not seeded before, then the rest, each group by speed."""
    ranked = elites(entries)
    if not ranked or k <= 0:
        return []
    best = min((e for e in ranked if e is ranked[0] or tie(e, ranked[0])),
               key=lambda e: e.kernel_id)
    again = " again: nothing faster beyond the noise since" if best.kernel_id in seeded_before \
        else ""
    chosen = [Seed(best.kernel_id, best.cell_label, f"fastest kernel{again}")]
    covered = {best.techniques}
    for group in ("novel", "unseeded", "any"):
        for e in ranked:
            if len(chosen) >= k:
                return chosen
            if any(s.kernel_id == e.kernel_id for s in chosen):
                continue
            if group != "any" and e.kernel_id in seeded_before:
                continue
            if group == "novel" and e.techniques in covered:
                continue
            covered.add(e.techniques)
            chosen.append(Seed(e.kernel_id, e.cell_label, _why(e, best, group)))
    return chosen


def _why(e: Entry, best: Entry, group: str) -> str:
    if e.time_ms is not None and best.time_ms is not None and tie(e, best):
        speed = "ties the fastest within the 95% CI"
    elif e.time_ms is not None and best.time_ms:
        speed = f"{e.time_ms / best.time_ms:.2f}x the fastest's time"
    else:
        speed = "untimed"
    if group == "novel":
        return f"stepping stone: best of its cell, techniques no other seed has ({speed})"
    if group == "unseeded":
        return f"best of its cell, not seeded before ({speed})"
    return f"best of its cell, seeded before ({speed})"
