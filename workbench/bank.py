"""The kernel bank: every verified kernel in the store, across sessions and problems.

Searchable by problem, op family, dtype and shape class; a new session can seed from it (the
same problem or a related one: a GEMM tile from matmul for a convolution), and ideation sees
the best related kernels as examples. Duplicates (same normalised source) appear once.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from workbench import verdict_seal
from workbench.source_key import source_key
from workbench.techniques import SHORT, signature
from workbench.store import Store

# Families whose kernels carry over: the CRFM team's best conv2d came from a GEMM kernel.
RELATED: dict[str, tuple[str, ...]] = {
    "convolution": ("matmul", "fused"),
    "matmul": ("convolution", "fused"),
    "fused": ("convolution", "matmul", "activation", "normalization"),
    "activation": ("fused",),
    "normalization": ("reduction", "fused"),
    "reduction": ("normalization", "loss", "scan"),
    "loss": ("reduction",),
    "pooling": ("convolution", "reduction"),
    "scan": ("reduction",),
}
# H200-class ridge point (fp32 FLOP/s over bytes/s, DESIGN.md): above it compute-bound.
_RIDGE_FLOP_PER_BYTE = 12.0
_FIELDS = ("problem", "family", "dtype", "shape", "technique", "kernel", "session")


def shape_class(flops: int | None, min_bytes: int | None) -> str:
    """Size bucket by the bytes an op must move, and which roofline bound it sits under."""
    size_b = min_bytes or 0
    size = ("tiny" if size_b < 1 << 20 else "small" if size_b < 64 << 20 else
            "large" if size_b < 1 << 30 else "huge")
    if not flops or not size_b:
        return size
    return f"{size}-{'compute' if flops / size_b > _RIDGE_FLOP_PER_BYTE else 'memory'}"


@dataclass
class Query:
    """Free words match any field; `field:value` (problem, family, dtype, shape, technique,
    kernel, session) must match that field."""
    words: list[str]
    fields: dict[str, str]

    @classmethod
    def parse(cls, text: str | None) -> "Query":
        words, fields = [], {}
        for token in (text or "").lower().split():
            key, sep, value = token.partition(":")
            if sep and key in _FIELDS and value:
                fields[key] = value
            else:
                words.append(token)
        return cls(words, fields)

    def matches(self, entry: dict) -> bool:
        values = {"problem": entry["problem"].lower(), "family": entry["family"].lower(),
                  "dtype": entry["dtype"].lower(), "shape": entry["shape"],
                  "technique": " ".join(entry["techniques"]), "kernel": str(entry["kernel"]),
                  "session": str(entry["session"] or "")}
        for key, value in self.fields.items():
            if key in ("kernel", "session"):
                if values[key] != value.lstrip("ks"):
                    return False
            elif value not in values[key]:
                return False
        text = " ".join(values.values())
        return all(re.search(re.escape(word), text) for word in self.words)


def entries(store: Store) -> list[dict]:
    """Every verified kernel, its best verdict, fastest first within each problem; a source
    seen before (normalised) is listed once, under its first kernel. Only verdicts the verifier
    sealed count: the bank seeds sessions and its kernels are examples in prompts."""
    rows = store.db.query(
        "select k.id as kernel, k.session_id as session, k.source, k.source_key, "
        "p.id as problem_id, p.name as problem, coalesce(p.family, 'unknown') as family, "
        "coalesce(p.dtype, 'float32') as dtype, p.flops, p.min_bytes, e.time_ms, "
        "e.speedup_eager, e.speedup_compile, e.floor_ms, e.gpu "
        "from kernels k join problems p on p.id = k.problem_id "
        "join evaluations e on e.id = (select max(id) from evaluations where kernel_id = k.id) "
        "where k.duplicate_of is null and k.pruned = 0 and e.time_ms is not null and "
        "(e.status = 'correct' or (e.status = 'flagged' and k.cleared = 1)) "
        f"and {verdict_seal.sql('e')} order by p.name, e.time_ms, k.id")
    out, seen = [], set()
    for row in rows:
        key = (row["problem_id"], row["source_key"] or source_key(row["source"]))
        if key in seen:
            continue
        seen.add(key)
        techniques = signature(row.pop("source"))
        out.append({**row, "shape": shape_class(row["flops"], row["min_bytes"]),
                    "techniques": [SHORT[t] for t in techniques]})
    return out


def search(store: Store, query: str | None = None, limit: int | None = None) -> list[dict]:
    """Bank entries matching `query` (see Query), fastest first within each problem."""
    q = Query.parse(query)
    found = [e for e in entries(store) if q.matches(e)]
    return found[:limit] if limit else found


def related(store: Store, problem_id: int, family: str, limit: int = 2,
            exclude_session: int | None = None) -> list[dict]:
    """The best verified kernels worth showing for a problem: its own from other sessions
    first, then the fastest (by speedup vs eager) of each related family's problems."""
    pool = [e for e in entries(store) if e["session"] != exclude_session or
            exclude_session is None]
    own = [e for e in pool if e["problem_id"] == problem_id]
    near = RELATED.get(family, ())
    others = sorted((e for e in pool if e["problem_id"] != problem_id and
                     (e["family"] == family or e["family"] in near)),
                    key=lambda e: -(e["speedup_eager"] or 0))
    picked, problems = own[:1], {problem_id}
    for e in others:
        if e["problem_id"] not in problems:
            problems.add(e["problem_id"])
            picked.append(e)
    return picked[:limit]


def examples_text(store: Store, problem_id: int, family: str, session_id: int,
                  max_chars: int = 3000) -> str:
    """Related kernels from the bank for an ideation prompt (sources trimmed)."""
    found = related(store, problem_id, family, exclude_session=session_id)
    if not found:
        return "None in the bank yet."
    parts = []
    for e in found:
        source = store.get("kernels", e["kernel"])["source"].rstrip()
        if len(source) > max_chars:
            source = source[:max_chars] + "\n# ... (trimmed)"
        speed = f", {e['speedup_eager']:.2f}x vs eager" if e["speedup_eager"] else ""
        techniques = "+".join(e["techniques"]) or "plain"
        parts.append(f"Kernel {e['kernel']} for `{e['problem']}` ({e['family']}, {e['dtype']}, "
                     f"{e['shape']}; {techniques}{speed}):\n\n```python\n{source}\n```")
    return "\n\n".join(parts)


def format_table(found: list[dict]) -> str:
    """The bank as a plain-text table for the terminal."""
    if not found:
        return "no verified kernels match"
    head = f"{'kernel':>7}  {'problem':<24} {'family':<13} {'dtype':<9} {'shape':<15} " \
           f"{'ms':>9} {'vs eager':>8}  techniques"
    lines = [head]
    for e in found:
        speed = f"{e['speedup_eager']:.2f}x" if e["speedup_eager"] else "-"
        lines.append(f"{'k' + str(e['kernel']):>7}  {e['problem'][:24]:<24} "
                     f"{e['family'][:13]:<13} {e['dtype'][:9]:<9} {e['shape']:<15} "
                     f"{e['time_ms']:>9.4f} {speed:>8}  {'+'.join(e['techniques']) or 'plain'}")
    return "\n".join(lines)


def add_seed(store: Store, session_id: int, kernel_id: int) -> None:
    """Seed the session's next round with a bank kernel (any problem's); kept in its settings."""
    session = store.find("sessions", session_id)
    if session is None:
        raise ValueError(f"no session {session_id}")
    if store.find("kernels", kernel_id) is None:
        raise ValueError(f"no kernel {kernel_id}")
    settings = json.loads(session["settings"] or "{}")
    seeds = settings.setdefault("seed_kernels", [])
    if kernel_id not in seeds:
        seeds.append(kernel_id)
    store.update("sessions", session_id, settings=settings)
