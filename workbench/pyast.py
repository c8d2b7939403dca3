"""Python's own parser behind one lock.

CPython 3.11 keeps the depth counter of its AST-to-object conversion in per-interpreter state,
so two threads parsing at once (the pool reviews candidates on several threads) can fail with
`SystemError: AST constructor recursion depth mismatch` (CPython gh-106905; fixed in 3.12 and
later, not in 3.11). Every parse in the core goes through here.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse, one thread at a time; raises SyntaxError as ast.parse does."""
    with _LOCK:
        return ast.parse(source, filename)


def literal_eval(text: str):
    """ast.literal_eval, one thread at a time (it parses too)."""
    with _LOCK:
        return ast.literal_eval(text)
