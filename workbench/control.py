"""Human decisions as store operations. The engine reads them; the TUI and the terminal call them.

Every function raises ControlError (str: one line) for an unknown id or a change that makes no
sense (editing an idea that already has implementations, clearing a kernel that isn't flagged).
"""
from __future__ import annotations

from workbench.llm.parse import guess_kind
from workbench.store import Store, now


class ControlError(Exception):
    """A human operation that cannot be done; str() is one line."""


def _row(store: Store, table: str, row_id: int, what: str) -> dict:
    found = store.rows(table, "id = ?", [row_id])
    if not found:
        raise ControlError(f"no {what} {row_id}")
    return found[0]


def _has_kernels(store: Store, idea_id: int) -> bool:
    return bool(store.db.execute("select 1 from kernels where idea_id = ? limit 1",
                                 [idea_id]).fetchone())


def approve_idea(store: Store, idea_id: int) -> None:
    idea = _row(store, "ideas", idea_id, "idea")
    if idea["status"] in ("approved", "edited", "implemented"):
        return
    store.set_idea_status(idea_id, "approved")


def veto_idea(store: Store, idea_id: int) -> None:
    """Vetoed ideas get no (further) implementations."""
    idea = _row(store, "ideas", idea_id, "idea")
    if idea["status"] == "implemented":
        raise ControlError(f"idea {idea_id} is already implemented; prune its kernels instead")
    store.set_idea_status(idea_id, "vetoed")


def edit_idea(store: Store, idea_id: int, text: str) -> None:
    """Replace an idea's text; an edited idea counts as approved."""
    text = " ".join(text.split())
    if not text:
        raise ControlError("an idea needs some text")
    _row(store, "ideas", idea_id, "idea")
    if _has_kernels(store, idea_id):
        raise ControlError(f"idea {idea_id} already has implementations; add a new idea instead")
    store.set_idea_status(idea_id, "edited", text=text)


def add_idea(store: Store, round_id: int, text: str, seed_kernel_id: int | None = None,
             kind: str | None = None) -> int:
    """A hand-written idea, approved as written. seed_kernel_id None: start from the reference."""
    text = " ".join(text.split())
    if not text:
        raise ControlError("an idea needs some text")
    _row(store, "rounds", round_id, "round")
    if seed_kernel_id is not None:
        _row(store, "kernels", seed_kernel_id, "kernel")
    return store.add_idea(round_id, text, author="human", kind=kind or guess_kind(text),
                          seed_kernel_id=seed_kernel_id, status="approved")


def pin_kernel(store: Store, kernel_id: int, pinned: bool = True) -> None:
    """Pinned kernels seed every round (unless pruned)."""
    _row(store, "kernels", kernel_id, "kernel")
    store.set_kernel_flags(kernel_id, pinned=pinned)


def _descendants(store: Store, kernel_id: int) -> list[int]:
    rows = store.db.execute(
        "with recursive tree(id) as (select ? union all "
        "select k.id from kernels k join tree t on k.parent_id = t.id) select id from tree",
        [kernel_id]).fetchall()
    return [r[0] for r in rows]


def prune_kernel(store: Store, kernel_id: int, pruned: bool = True) -> list[int]:
    """Prune (or restore) a branch: the kernel and all its descendants. Returns their ids."""
    _row(store, "kernels", kernel_id, "kernel")
    ids = _descendants(store, kernel_id)
    with store.transaction():
        for kid in ids:
            store.set_kernel_flags(kid, pruned=pruned)
    return ids


def clear_kernel(store: Store, kernel_id: int) -> None:
    """A human looked at a flagged kernel and vouches for it: it may seed again."""
    _row(store, "kernels", kernel_id, "kernel")
    latest = store.latest_evaluation(kernel_id)
    if not latest or latest["status"] != "flagged":
        status = latest["status"] if latest else "not evaluated"
        raise ControlError(f"kernel {kernel_id} is not flagged ({status}); nothing to clear")
    store.set_kernel_flags(kernel_id, cleared=True)


def add_child_kernel(store: Store, parent_id: int, source: str) -> int:
    """A human edit of a kernel, stored as its child; the engine evaluates it on its next step."""
    if "ModelNew" not in source:
        raise ControlError("a kernel must define class ModelNew")
    parent = _row(store, "kernels", parent_id, "kernel")
    return store.add_kernel(parent["problem_id"], source, session_id=parent["session_id"],
                            idea_id=parent["idea_id"], parent_id=parent_id, origin="human")


def stop_session(store: Store, session_id: int, reason: str = "stopped by the user") -> None:
    """Ask a running engine to stop after the work in hand; `resume` continues it."""
    _row(store, "sessions", session_id, "session")
    store.update("sessions", session_id, status="stopped", stop_reason=reason, ended_at=now())
