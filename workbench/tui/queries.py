"""Read-only queries behind the views: each fetches only what one visible widget needs.

The tree is populated lazily, so every query here is bounded by one parent (a problem's
sessions, a round's ideas, an idea's kernels) and uses the store's indexes; nothing scans all
kernels on a keypress.
"""
from __future__ import annotations

import json
from typing import Any

from workbench import verdict_seal
from workbench.store import Store
from workbench.store_errors import MAX_ID

# The latest evaluation of kernel k (a kernel can be re-timed; the newest verdict counts).
_LATEST_EVAL = "e.id = (SELECT max(id) FROM evaluations WHERE kernel_id = k.id)"

# Hand edits of kernel k: children with no idea of their own (or k's idea). Seeds' children
# from later rounds belong to their own ideas and are not counted.
_EDITS = """(SELECT count(*) FROM kernels c WHERE c.parent_id = k.id
              AND (c.idea_id IS NULL OR c.idea_id = k.idea_id))"""

# A verdict the verifier did not seal reads as `untrusted` (workbench.verdict_seal).
_STATUS = f"CASE WHEN e.id IS NULL OR {verdict_seal.sql('e')} THEN e.status ELSE 'untrusted' END"

_KERNEL_COLUMNS = f"""
    k.id, k.idea_id, k.parent_id, k.session_id, k.origin, k.pruned, k.pinned, k.cleared,
    k.created_at, k.duplicate_of, {_STATUS} AS status, e.time_ms, e.ci95_lo_ms, e.ci95_hi_ms, e.speedup_eager,
    e.speedup_compile, e.floor_ms, e.flags, e.error, e.reused_from
"""


def _all(store: Store, sql: str, params: list | tuple = ()) -> list[dict[str, Any]]:
    cursor = store.db.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _one(store: Store, sql: str, params: list | tuple = ()) -> dict[str, Any] | None:
    rows = _all(store, sql, params)
    return rows[0] if rows else None


def problems(store: Store) -> list[dict]:
    return _all(store, """
        SELECT p.id, p.name, p.family, p.dtype, count(s.id) AS sessions
        FROM problems p LEFT JOIN sessions s ON s.problem_id = p.id
        GROUP BY p.id ORDER BY p.name""")


def sessions(store: Store, problem_id: int) -> list[dict]:
    return _all(store, """
        SELECT s.id, s.provider, s.model, s.status, s.started_at, s.stop_reason,
               (SELECT count(*) FROM rounds r WHERE r.session_id = s.id) AS rounds
        FROM sessions s WHERE s.problem_id = ? ORDER BY s.id""", [problem_id])


def rounds(store: Store, session_id: int) -> list[dict]:
    """Rounds with their idea count and best correct speedup vs eager."""
    return _all(store, f"""
        SELECT r.id, r.n, r.status, r.session_id,
               (SELECT count(*) FROM ideas i2 WHERE i2.round_id = r.id) AS ideas,
               (SELECT max(e.speedup_eager) FROM ideas i
                  JOIN kernels k ON k.idea_id = i.id
                  JOIN evaluations e ON e.kernel_id = k.id AND {_LATEST_EVAL}
                 WHERE i.round_id = r.id AND ({_STATUS} = 'correct'
                       OR ({_STATUS} = 'flagged' AND k.cleared = 1))) AS best
        FROM rounds r WHERE r.session_id = ? ORDER BY r.n""", [session_id])


def ideas(store: Store, round_id: int) -> list[dict]:
    return _all(store, """
        SELECT i.id, i.round_id, i.text, i.author, i.status, i.kind, i.seed_kernel_id,
               (SELECT count(*) FROM kernels k WHERE k.idea_id = i.id) AS kernels,
               (SELECT count(*) FROM idea_echoes x WHERE x.idea_id = i.id) AS echoes
        FROM ideas i WHERE i.round_id = ? ORDER BY i.id""", [round_id])


def idea_kernels(store: Store, idea_id: int) -> list[dict]:
    """The kernels implementing an idea (hand edits hang under their parent instead)."""
    return _all(store, f"""
        SELECT {_KERNEL_COLUMNS},
               {_EDITS} AS edits
        FROM kernels k LEFT JOIN evaluations e ON e.kernel_id = k.id AND {_LATEST_EVAL}
        WHERE k.idea_id = ? AND (k.parent_id IS NULL OR k.parent_id NOT IN
              (SELECT id FROM kernels WHERE idea_id = ?))
        ORDER BY k.id""", [idea_id, idea_id])


def kernel_edits(store: Store, kernel_id: int) -> list[dict]:
    """Kernels derived by hand from this one (same idea, or none), shown as its children."""
    return _all(store, f"""
        SELECT {_KERNEL_COLUMNS},
               {_EDITS} AS edits
        FROM kernels k LEFT JOIN evaluations e ON e.kernel_id = k.id AND {_LATEST_EVAL}
        WHERE k.parent_id = ? AND (k.idea_id IS NULL OR k.idea_id =
              (SELECT idea_id FROM kernels WHERE id = ?))
        ORDER BY k.id""", [kernel_id, kernel_id])


def round_kernels(store: Store, round_id: int) -> list[dict]:
    """Every kernel of a round, for the benchmark table."""
    return _all(store, f"""
        SELECT {_KERNEL_COLUMNS}
        FROM ideas i JOIN kernels k ON k.idea_id = i.id
        LEFT JOIN evaluations e ON e.kernel_id = k.id AND {_LATEST_EVAL}
        WHERE i.round_id = ? ORDER BY k.id""", [round_id])


def all_idea_kernels(store: Store, idea_id: int) -> list[dict]:
    """Every kernel of an idea, hand edits included, for the benchmark table."""
    return _all(store, f"""
        SELECT {_KERNEL_COLUMNS}
        FROM kernels k LEFT JOIN evaluations e ON e.kernel_id = k.id AND {_LATEST_EVAL}
        WHERE k.idea_id = ? ORDER BY k.id""", [idea_id])


def kernel(store: Store, kernel_id: int) -> dict | None:
    return _one(store, f"""
        SELECT {_KERNEL_COLUMNS}, k.source, k.problem_id
        FROM kernels k LEFT JOIN evaluations e ON e.kernel_id = k.id AND {_LATEST_EVAL}
        WHERE k.id = ?""", [kernel_id])


def kernel_source(store: Store, kernel_id: int) -> str | None:
    row = _one(store, "SELECT source FROM kernels WHERE id = ?", [kernel_id])
    return row["source"] if row else None


def build_extensions(store: Store, kernel_id: int) -> list | None:
    """What load_inline received in the kernel's latest build, if a build recorded it."""
    row = _one(store, """SELECT extensions FROM builds WHERE kernel_id = ? AND extensions
                         IS NOT NULL AND extensions != '[]' ORDER BY id DESC LIMIT 1""",
               [kernel_id])
    if not row:
        return None
    try:
        return json.loads(row["extensions"])
    except (TypeError, ValueError):
        return None


def idea(store: Store, idea_id: int) -> dict | None:
    return _one(store, """SELECT i.*, r.n AS round_n, r.session_id FROM ideas i
                          JOIN rounds r ON r.id = i.round_id WHERE i.id = ?""", [idea_id])


def round_row(store: Store, round_id: int) -> dict | None:
    return _one(store, "SELECT * FROM rounds WHERE id = ?", [round_id])


def session(store: Store, session_id: int) -> dict | None:
    return _one(store, """SELECT s.*, p.name AS problem FROM sessions s
                          JOIN problems p ON p.id = s.problem_id WHERE s.id = ?""", [session_id])


def session_cost(store: Store, session_id: int) -> dict:
    return _one(store, """SELECT count(*) AS calls, coalesce(sum(tokens_in), 0) AS tokens_in,
                                 coalesce(sum(tokens_out), 0) AS tokens_out,
                                 coalesce(sum(cost_usd), 0.0) AS cost_usd
                          FROM llm_calls WHERE session_id = ?""", [session_id]) or {}


def latest_session(store: Store, problem_id: int | None = None) -> dict | None:
    if problem_id is None:
        return _one(store, "SELECT * FROM sessions ORDER BY id DESC LIMIT 1")
    return _one(store, "SELECT * FROM sessions WHERE problem_id = ? ORDER BY id DESC LIMIT 1",
                [problem_id])


def problem_by_name(store: Store, name: str) -> dict | None:
    return _one(store, "SELECT * FROM problems WHERE name = ? ORDER BY id DESC LIMIT 1", [name])


def unevaluated_kernels(store: Store, session_id: int) -> list[int]:
    """Kernels with no verdict yet: work that was in flight (or never started) at last quit."""
    return [r["id"] for r in _all(store, """
        SELECT k.id FROM kernels k WHERE k.session_id = ? AND k.pruned = 0
          AND k.duplicate_of IS NULL AND NOT EXISTS
          (SELECT 1 FROM evaluations e WHERE e.kernel_id = k.id) ORDER BY k.id""",
        [session_id])]


def search(store: Store, text: str, limit: int = 50) -> list[dict]:
    """Ideas whose text matches, and a kernel by id ("k123" or "123")."""
    found: list[dict] = []
    digits = text.lower().removeprefix("k")
    if digits.isdigit() and int(digits) <= MAX_ID:   # a longer number is no kernel's id
        row = _one(store, """SELECT k.id, k.idea_id, i.round_id, r.session_id, s.problem_id
                             FROM kernels k LEFT JOIN ideas i ON i.id = k.idea_id
                             LEFT JOIN rounds r ON r.id = i.round_id
                             LEFT JOIN sessions s ON s.id = k.session_id WHERE k.id = ?""",
                   [int(digits)])
        if row:
            found.append({"kind": "kernel", **row})
    for row in _all(store, """SELECT i.id, i.text, i.status, r.n, r.id AS round_id,
                                     r.session_id, s.problem_id
                              FROM ideas i JOIN rounds r ON r.id = i.round_id
                              JOIN sessions s ON s.id = r.session_id
                              WHERE i.text LIKE ? ORDER BY i.id DESC LIMIT ?""",
                    [f"%{text}%", limit]):
        found.append({"kind": "idea", **row})
    return found


def path_to_idea(store: Store, idea_id: int) -> list[tuple[str, int]]:
    """Tree keys from the problem down to an idea ([] if it does not exist)."""
    row = _one(store, """SELECT i.id, r.id AS round_id, s.id AS session_id, s.problem_id
                         FROM ideas i JOIN rounds r ON r.id = i.round_id
                         JOIN sessions s ON s.id = r.session_id WHERE i.id = ?""", [idea_id])
    if not row:
        return []
    return [("problem", row["problem_id"]), ("session", row["session_id"]),
            ("round", row["round_id"]), ("idea", idea_id)]


def path_to_kernel(store: Store, kernel_id: int) -> list[tuple[str, int]]:
    """Tree keys down to a kernel: its idea, then any hand-edit ancestors of the same idea."""
    chain: list[tuple[str, int]] = []
    current = _one(store, "SELECT id, idea_id, parent_id FROM kernels WHERE id = ?", [kernel_id])
    if not current or current["idea_id"] is None:
        return []
    idea_id = current["idea_id"]
    while current is not None:
        chain.insert(0, ("kernel", current["id"]))
        parent = (_one(store, "SELECT id, idea_id, parent_id FROM kernels WHERE id = ?",
                       [current["parent_id"]]) if current["parent_id"] else None)
        current = parent if parent and parent["idea_id"] == idea_id else None
    return path_to_idea(store, idea_id) + chain
