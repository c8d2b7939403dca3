"""The store's queries for hardware evidence (workbench.evidence): profiles per kernel, a
kernel's lineage, the engineer's choice of evidence for the next prompt. Mixed into Store."""
from __future__ import annotations

import json
from typing import Any


class EvidenceQueries:
    """Needs the Store's `db`, `insert` and `rows`."""

    db: Any

    def add_profile(self, kernel_id: int, kind: str, data: dict, summary: str,
                    evaluation_id: int | None = None) -> int:
        return self.insert("profiles", {"kernel_id": kernel_id, "evaluation_id": evaluation_id,
                                        "kind": kind, "summary": summary, "data": data})

    def kernel_profiles(self, kernel_id: int) -> dict[str, dict]:
        """The latest profile of each kind for a kernel: {kind: row with data decoded}."""
        latest: dict[str, dict] = {}
        for row in self.db.query(
                "select * from profiles where kernel_id = ? and id in (select max(id) from "
                "profiles where kernel_id = ? group by kind) order by id", [kernel_id, kernel_id]):
            latest[row["kind"]] = {**row, "data": json.loads(row["data"] or "{}")}
        return latest

    def latest_problem_profile(self, problem_id: int, kind: str) -> dict | None:
        """The newest profile of a kind among a problem's kernels (e.g. the GPU a run saw)."""
        row = next(self.db.query(
            "select p.* from profiles p join kernels k on k.id = p.kernel_id where "
            "k.problem_id = ? and p.kind = ? order by p.id desc limit 1", [problem_id, kind]), None)
        return {**row, "data": json.loads(row["data"] or "{}")} if row else None

    def lineage(self, kernel_id: int, limit: int = 8) -> list[int]:
        """The kernel and its ancestors through parent_id, nearest first."""
        return [r["id"] for r in self.db.query(
            "with recursive up(id, parent_id, depth) as (select id, parent_id, 0 from kernels "
            "where id = ? union all select k.id, k.parent_id, up.depth + 1 from kernels k "
            "join up on k.id = up.parent_id where up.depth < ?) select id from up order by depth",
            [kernel_id, limit - 1])]

    def set_evidence_choice(self, kernel_id: int, attached: list[str], note: str = "") -> int:
        return self.insert("evidence_choices", {"kernel_id": kernel_id, "attached": attached,
                                                "note": note})

    def evidence_choice(self, kernel_id: int) -> dict | None:
        """The engineer's latest choice for prompts starting from this kernel, or None."""
        found = self.rows("evidence_choices", "kernel_id = ?", [kernel_id], order_by="id desc")
        if not found:
            return None
        return {**found[0], "attached": json.loads(found[0]["attached"] or "[]")}
