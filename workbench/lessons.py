"""Human memory: lessons an engineer writes while reviewing kernels, tagged by op family.

"precision cheat", "smem index precompute helped": stored once, shown to every later ideation
of a problem of that family, in any session.
"""
from __future__ import annotations

from workbench.store import Store


class LessonError(Exception):
    """A lesson that cannot be stored; str() is one line."""


def add_lesson(store: Store, text: str, family: str | None = None,
               kernel_id: int | None = None) -> int:
    """Store a lesson; its family defaults to that of the kernel's problem."""
    text = " ".join(text.split())
    if not text:
        raise LessonError("a lesson needs some text")
    session_id = None
    if kernel_id is not None:
        kernel = store.find("kernels", kernel_id)
        if kernel is None:
            raise LessonError(f"no kernel {kernel_id}")
        session_id = kernel["session_id"]
        if family is None:
            family = store.get("problems", kernel["problem_id"])["family"]
    family = (family or "").strip().lower()
    if not family:
        raise LessonError("say which op family the lesson is about (--family, e.g. matmul)")
    return store.insert("lessons", {"family": family, "text": text, "kernel_id": kernel_id,
                                    "session_id": session_id})


def lessons_for(store: Store, family: str | None, limit: int = 20) -> list[dict]:
    """The family's lessons, newest first (all families' when family is None)."""
    if family is None:
        return list(store.db.query("select * from lessons order by id desc limit ?", [limit]))
    return list(store.db.query("select * from lessons where family = ? order by id desc "
                               "limit ?", [family.lower(), limit]))


def lessons_text(store: Store, family: str | None) -> str:
    """The lessons for an ideation prompt."""
    found = lessons_for(store, family) if family else []
    if not found:
        return "None recorded for this op family yet."
    return "\n".join(f"- {row['text']}" + (f" (about kernel {row['kernel_id']})"
                                           if row["kernel_id"] else "") for row in found)
