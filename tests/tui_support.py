"""Shared pieces for the TUI tests: a generated database, an isolated config, waiting helpers."""
from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path

from workbench.store import Store

ROOT = Path(__file__).resolve().parent.parent


def _bench_module():
    spec = importlib.util.spec_from_file_location("tui_db", ROOT / "bench" / "tui_db.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_db = _bench_module().build_db


def small_db(path: Path, **kw) -> Store:
    """One session, 3 rounds of 3 ideas, 2 kernels each; the last idea's kernels unevaluated."""
    return build_db(path, **{"sessions": 1, "rounds": 3, "ideas": 3, "kernels_per_idea": 2, **kw})


async def wait_for(pilot, condition, timeout: float = 15.0, what: str = "condition") -> None:
    """Let the app run until `condition()` holds (work lands from threads)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)
        await asyncio.sleep(0)


async def select(pilot, app, path) -> None:
    """Move the tree cursor to the end of `path` (the app's own start-up reveal may race)."""
    tree = app.main_screen.kernel_tree
    await wait_for(pilot, lambda: app.started, timeout=5, what="start-up")

    def there() -> bool:
        node = tree.cursor_node
        if node is not None and node.data.key == path[-1]:
            return True
        assert tree.reveal(path), path
        return False

    await wait_for(pilot, there, timeout=5, what=f"the cursor on {path[-1]}")


def labels(app) -> list[str]:
    """Plain text of every node label currently in the tree."""
    tree = app.main_screen.kernel_tree
    found = []

    def walk(node):
        for child in node.children:
            found.append(child.label.plain)
            walk(child)

    walk(tree.root)
    return found


def status_line(app) -> str:
    return app.main_screen.query_one("#status").content.plain
