"""How responsive is the workbench on a big database?

Builds a kernels.db with >= 10,000 kernels (bench/tui_db.py), then measures:

  in-process (Textual's headless driver, Pilot):
    start      App() constructed -> main screen mounted, tree loaded, cursor on the latest
               session and its panes filled (what the user sees first)
    down       one tree-navigation keypress handled: key dispatched, cursor moved, the
               idea/CUDA/table panes refilled for the new node, app idle again
    expand     one right-arrow that expands a node (lazy query of its children) likewise
  real command in tmux (80x24, TERM=xterm-256color, no COLORTERM):
    start      `kernel-workbench --db X` spawned -> the first full screen with data visible
               (includes Python, Textual and the app's imports)
    key        `send-keys Down` -> the screen changed (polled every 5 ms)

Targets (issue 5): interactive <= 1.5 s after start; a navigation keypress <= 50 ms.

    python bench/tui_responsiveness.py [--kernels 10000] [--db PATH] [--no-tmux]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_db import build_db  # noqa: E402

from workbench.store import Store  # noqa: E402


def make_db(path: Path, kernels: int) -> int:
    """4 sessions x 20 rounds x 8 ideas; kernels per idea chosen to reach `kernels`."""
    per_idea = max(1, -(-kernels // (4 * 20 * 8 * 6 // 7)))
    while True:
        if path.exists():
            path.unlink()
        store = build_db(path, sessions=4, rounds=20, ideas=8, kernels_per_idea=per_idea)
        count = store.db["kernels"].count
        if count >= kernels:
            return count
        per_idea += 1


def summary(samples: list[float]) -> str:
    ms = sorted(s * 1e3 for s in samples)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return (f"median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, max {ms[-1]:.1f} ms "
            f"(n={len(ms)})")


async def in_process(db: Path, presses: int) -> dict:
    from textual import events
    from textual.screen import Screen

    from workbench.tui.app import WorkbenchApp

    painted: list[float] = []
    refresh = Screen._compositor_refresh

    def timed_refresh(screen) -> None:
        refresh(screen)
        painted.append(time.perf_counter())

    Screen._compositor_refresh = timed_refresh  # when each paint finished

    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp()  # no user config: the shipped defaults
    t0 = time.perf_counter()
    app = WorkbenchApp(Store(db))
    async with app.run_test(size=(80, 24)) as pilot:
        tree = app.main_screen.kernel_tree
        while tree.cursor_node is None or tree.cursor_node.data.kind != "session":
            await pilot.pause(0.005)
        await pilot.pause()
        start = time.perf_counter() - t0

        samples: dict[str, list[float]] = {}

        async def press(key: str) -> None:
            """One sample: from the key event entering the app to every message it caused
            being handled (panes refilled) and the next paint (layout + compositor) done."""
            painted.clear()
            t = time.perf_counter()
            app._driver.send_message(events.Key(key, None))
            await pilot._wait_for_screen()
            handled = time.perf_counter()
            while not painted and time.perf_counter() - handled < 0.5:
                await asyncio.sleep(0.001)
            if painted:  # a key that changed nothing paints nothing: not a sample
                kind = tree.cursor_node.data.kind
                name = f"{key} (to a {kind})"
                samples.setdefault(name, []).append(painted[-1] - t)
            await pilot.pause(0.03)  # a typing pause; trailing repaints land in this sample

        # Open and close ten rounds (each loads its ideas lazily), then walk down through a
        # round, expanding every idea on the way (each loads its kernels lazily).
        for _ in range(10):
            for key in ("down", "right", "left"):
                await press(key)
        await press("right")
        while len(samples.get("down (to a kernel)", [])) < presses:
            node = tree.cursor_node
            await press("right" if node.allow_expand and not node.is_expanded
                        and node.data.kind != "kernel" else "down")
        loaded = len(tree._by_key)
    return {"start": start, "samples": samples, "loaded_nodes": loaded}


SOCKET = f"kw-bench-{os.getpid()}"  # a private tmux server, fresh for each run


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True,
                          check=False).stdout


def in_tmux(db: Path, presses: int) -> dict:
    env_cmd = (f"env -u COLORTERM TERM=xterm-256color XDG_CONFIG_HOME={tempfile.mkdtemp()} "
               f"kernel-workbench --db {db}")
    t0 = time.perf_counter()
    tmux("new-session", "-d", "-s", "bench", "-x", "80", "-y", "24", env_cmd)
    screen = ""
    while "best/round ▃" not in screen or "└ ▼ session 4" not in screen:
        if time.perf_counter() - t0 > 30:
            raise SystemExit("the app did not show its screen within 30 s:\n" + screen)
        time.sleep(0.005)
        screen = tmux("capture-pane", "-p", "-t", "bench")
    start = time.perf_counter() - t0
    time.sleep(1.0)  # let start-up notifications settle
    keys = []
    for i in range(presses):
        before = tmux("capture-pane", "-p", "-t", "bench")
        key = "Right" if i % 2 == 0 else "Down"
        t = time.perf_counter()
        tmux("send-keys", "-t", "bench", key)
        while tmux("capture-pane", "-p", "-t", "bench") == before:
            if time.perf_counter() - t > 2:
                break  # nothing changed (e.g. a leaf): not a sample
            time.sleep(0.005)
        else:
            keys.append(time.perf_counter() - t)
    tmux("send-keys", "-t", "bench", "q")
    time.sleep(0.5)
    tmux("kill-server")
    return {"start": start, "keys": keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=10_000)
    parser.add_argument("--db", type=Path, help="reuse or create this database")
    parser.add_argument("--presses", type=int, default=60, help="kernel rows to walk through")
    parser.add_argument("--no-tmux", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="kw-bench-"))
    db = args.db or tmp / "kernels.db"
    if db.exists():
        count = Store(db).db["kernels"].count
    else:
        t = time.perf_counter()
        count = make_db(db, args.kernels)
        print(f"built {db} with {count} kernels in {time.perf_counter() - t:.1f} s")
    size_mb = db.stat().st_size / 1e6

    result = asyncio.run(in_process(db, args.presses))
    print(f"database: {count} kernels, {size_mb:.0f} MB")
    print(f"in-process start to interactive: {result['start'] * 1e3:.0f} ms")
    for name, values in sorted(result["samples"].items()):
        print(f"in-process keypress, {name}: {summary(values)}")
    every = [v for values in result["samples"].values() for v in values]
    print(f"in-process keypress, all: {summary(every)}")
    print(f"tree nodes loaded after the walk: {result['loaded_nodes']} of {count}+ rows")
    if not args.no_tmux and shutil.which("tmux") and shutil.which("kernel-workbench"):
        real = in_tmux(db, min(args.presses, 40))
        print(f"tmux: command start to first screen with data: {real['start'] * 1e3:.0f} ms")
        print(f"tmux: keypress to screen change: {summary(real['keys'])}")
    if args.db is None:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
