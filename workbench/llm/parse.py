"""Reading model output: optimization ideas (with their kind) and the candidate's code.

Models wrap answers in prose, emit several code blocks, forget fences or the JSON they were
asked for; everything here degrades to "nothing usable" (empty list / None), never an exception.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from workbench import pyast
from workbench.source_key import text_key

# The optimization kinds of the CRFM post; ideation is steered toward the ones not yet tried.
KINDS: dict[str, str] = {
    "memory": "memory access (coalescing, shared-memory tiling, vectorized loads, caching)",
    "asynchrony": "asynchrony and latency hiding (cp.async, double buffering, pipelining)",
    "precision": "data type and precision (half/bf16, tensor cores, mixed accumulation)",
    "compute": "compute and instructions (fusion, intrinsics, FMA, warp shuffles)",
    "parallelism": "parallelism and occupancy (block/grid shape, registers, split work)",
    "control_flow": "control flow and loops (unrolling, branch removal, loop restructuring)",
}

_KEYWORDS: dict[str, tuple[str, ...]] = {
    "memory": ("memory", "coalesc", "shared", "smem", "tiling", "tile", "vectoriz", "float4",
               "cache", "load", "bandwidth", "bank conflict", "ldg", "l2"),
    "asynchrony": ("async", "latency", "pipelin", "double buffer", "double-buffer", "prefetch",
                   "overlap", "cp.async", "tma", "asynchron"),
    "precision": ("precision", "fp16", "bf16", "half", "tf32", "tensor core", "dtype",
                  "data type", "mixed", "wmma", "mma"),
    "compute": ("compute", "instruction", "fuse", "fusion", "intrinsic", "fma", "__expf",
                "shuffle", "shfl", "arithmetic", "math"),
    "parallelism": ("parallel", "occupancy", "block size", "thread", "grid", "warp", "register",
                    "split", "launch config"),
    "control_flow": ("control", "loop", "unroll", "branch", "divergen", "flow", "predicat"),
}


@dataclass
class ParsedIdea:
    text: str
    kind: str | None


def normalize_kind(label: str | None) -> str | None:
    """Map a model's kind label ("Memory access", "latency-hiding"...) onto KINDS, or None."""
    if not label:
        return None
    key = re.sub(r"[^a-z]+", "_", label.lower()).strip("_")
    if key in KINDS:
        return key
    for kind, description in KINDS.items():
        if key and key in re.sub(r"[^a-z]+", "_", description):
            return kind
    return guess_kind(label)


def guess_kind(text: str) -> str | None:
    """The kind whose keywords the text mentions most; None when none match."""
    lowered = text.lower()
    scores = {kind: sum(lowered.count(w) for w in words) for kind, words in _KEYWORDS.items()}
    best = max(scores, key=scores.get)
    return best if scores[best] else None


def _idea_from(item) -> ParsedIdea | None:
    if isinstance(item, str):
        text, kind = item, None
    elif isinstance(item, dict):
        text = next((item[k] for k in ("idea", "text", "description", "summary")
                     if isinstance(item.get(k), str)), None)
        kind = next((item[k] for k in ("kind", "category", "type") if isinstance(item.get(k), str)),
                    None)
        if text is None:
            return None
    else:
        return None
    text = " ".join(text.split())
    if not text:
        return None
    return ParsedIdea(text, normalize_kind(kind) or guess_kind(text))


def _json_ideas(text: str) -> list[ParsedIdea] | None:
    # Fenced blocks first: a code block after the list must not spoil the brackets' span.
    candidates = [body for _, body in _FENCE.findall(text) if body.lstrip()[:1] in "[{"]
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    obj_start, obj_end = text.find("{"), text.rfind("}")
    if 0 <= obj_start < obj_end:
        candidates.append(text[obj_start:obj_end + 1])
    for chunk in candidates:
        try:
            data = json.loads(chunk)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if isinstance(data, list):
            ideas = [idea for idea in map(_idea_from, data) if idea]
            if ideas:
                return ideas
    return None


_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.*)$")
_TAG = re.compile(r"^(?:\[([^\]]{2,40})\]|\(([^)]{2,40})\)|([A-Za-z /_-]{2,40}):)\s*(.*)$")


def _list_ideas(text: str) -> list[ParsedIdea]:
    items: list[str] = []
    open_item = in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            open_item = False     # code after a list belongs to no idea
            continue
        if in_fence:
            continue
        match = _ITEM.match(line)
        if match:
            items.append(match.group(1))
            open_item = True
        elif open_item and line.strip() and line[:1].isspace():
            items[-1] += " " + line.strip()   # an indented continuation of the last item
        elif line.strip():
            open_item = False     # unindented prose ends the item
    ideas = []
    for item in items:
        item = item.replace("**", "").replace("__", "").strip()
        kind = None
        tag = _TAG.match(item)
        if tag:
            label = next(g for g in tag.groups()[:3] if g)
            if normalize_kind(label) and tag.group(4):
                kind, item = normalize_kind(label), tag.group(4)
        idea = _idea_from(item)
        if idea:
            ideas.append(ParsedIdea(idea.text, kind or idea.kind))
    return ideas


def parse_ideas(text: str, limit: int | None = None) -> list[ParsedIdea]:
    """Ideas from a JSON list (asked for) or a numbered/bulleted list; duplicates dropped."""
    ideas = _json_ideas(text or "") or _list_ideas(text or "")
    seen, unique = set(), []
    for idea in ideas:
        key = text_key(idea.text)
        if key not in seen:
            seen.add(key)
            unique.append(idea)
    return unique[:limit] if limit else unique


_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_IMPORT = re.compile(r"^(import \w|from [\w.]+ import )")


def _trim_to_parse(lines: list[str]) -> str:
    """Drop trailing prose: cut at the first syntax error until the rest parses (bounded)."""
    for _ in range(20):
        chunk = "\n".join(lines)
        try:
            pyast.parse(chunk)
            return chunk
        except SyntaxError as e:
            if not e.lineno or e.lineno <= 1 or e.lineno > len(lines):
                return chunk
            lines = lines[:e.lineno - 1]
    return "\n".join(lines)


def extract_code(text: str, marker: str = "ModelNew") -> str | None:
    """The Python source that defines `class ModelNew`, from fenced blocks or bare text."""
    text = text or ""
    defines = re.compile(rf"^\s*class\s+{marker}\b", re.M)
    blocks = [body for lang, body in _FENCE.findall(text)
              if lang.lower() in ("", "python", "py", "python3")]
    with_model = [b for b in blocks if defines.search(b)]
    if with_model:
        return with_model[-1].strip("\n") + "\n"   # the last one is usually the final answer
    if not defines.search(text):
        return None
    lines = text.replace("```", "").splitlines()
    model_line = next(i for i, line in enumerate(lines) if defines.match(line))
    # Code starts at its first import (prose rarely begins a line with one), else at the class.
    start = next((i for i, line in enumerate(lines[:model_line]) if _IMPORT.match(line)),
                 model_line)
    return _trim_to_parse(lines[start:]).strip("\n") + "\n"
