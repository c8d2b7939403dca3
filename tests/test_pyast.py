"""Parsing from several threads at once (CPython 3.11's AST conversion is not thread-safe)."""
from __future__ import annotations

import ast
import re
import sys
import threading
import time
from pathlib import Path

import pytest

import workbench
from workbench import pyast

NESTED = "x = " + "(" * 50 + "1" + ")" * 50 + "\n" \
         + "def f(a):\n    return [[a + 1 for a in b] for b in c]\n" * 200


class _Finalised:
    """Its finaliser runs Python code inside the parser's allocations, so threads switch there."""

    def __del__(self):
        sum(range(100))


def _parse_in_threads(parse, seconds: float = 10.0) -> list[BaseException]:
    errors: list[BaseException] = []
    stop = threading.Event()

    def parser():
        try:
            while not stop.is_set() and not errors:
                parse(NESTED)
        except SystemError as e:
            errors.append(e)

    def churn():
        while not stop.is_set() and not errors:
            cycle = _Finalised()
            cycle.self = cycle

    threads = [threading.Thread(target=parser) for _ in range(4)] + [threading.Thread(target=churn)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not errors:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    return errors


def test_parse_is_safe_from_several_threads():
    assert _parse_in_threads(pyast.parse, seconds=2.0) == []


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the race is fixed in CPython 3.12")
def test_the_race_is_real_without_the_lock():
    """Shows the test above can fail: bare ast.parse breaks under the same load (or the
    interpreter got lucky for 20 s, which has not been seen)."""
    errors = _parse_in_threads(ast.parse, seconds=20.0)
    assert errors and "recursion depth mismatch" in str(errors[0])


def test_the_core_parses_only_through_the_lock():
    root = Path(workbench.__file__).parent
    bare = re.compile(r"\bast\.(parse|literal_eval)\(")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "pyast.py" and bare.search(p.read_text())]
    assert offenders == []
