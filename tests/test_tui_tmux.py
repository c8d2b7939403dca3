"""The real `kernel-workbench` command in a real terminal: tmux at 80x24, 256 colours, no
COLORTERM (as over SSH). Keys go in with send-keys; the screen comes back with capture-pane."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tui_support import small_db

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Tmux:
    def __init__(self, tmp_path, command: str) -> None:
        self.socket = f"kw-test-{os.getpid()}-{time.monotonic_ns()}"
        env = (f"env -u COLORTERM TERM=xterm-256color XDG_CONFIG_HOME={tmp_path / 'config'} "
               f"KERNEL_WORKBENCH_DB={tmp_path / 'unused.db'}")
        # The exit status is printed after the app ends, and the pane stays open to read it.
        self.run("new-session", "-d", "-s", "t", "-x", "80", "-y", "24",
                 f"cd {shlex.quote(str(tmp_path))} && {env} {command}; echo EXIT=$?; sleep 60")

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=False).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        """Send keys one by one, each once the screen has settled: on a loaded machine a key
        sent while the tree still lays out a node just expanded would land on the old lines."""
        for key in keys:
            self.run("send-keys", "-t", "t", key)
            self.settle()

    def settle(self, timeout: float = 5.0) -> None:
        deadline, before = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = self.screen()
            if now == before:
                return
            before = now

    def wait_for(self, *texts: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts} not on screen:\n{screen}")
            time.sleep(0.1)

    def close(self) -> None:
        self.run("kill-server")


def command() -> str:
    found = shutil.which("kernel-workbench")
    return shlex.quote(found) if found else f"{shlex.quote(sys.executable)} -m workbench"


@pytest.fixture
def tmux_factory(tmp_path):
    sessions = []

    def start(args: str) -> Tmux:
        session = Tmux(tmp_path, f"{command()} {args}")
        sessions.append(session)
        return session

    yield start
    for session in sessions:
        session.close()


def test_browse_prune_and_quit_in_a_real_terminal(tmp_path, tmux_factory):
    store = small_db(tmp_path / "k.db")
    term = tmux_factory(f"--db {tmp_path / 'k.db'}")
    screen = term.wait_for("session 1", "best/round")
    assert len(screen.splitlines()[0]) <= 80
    # Session -> round 1 -> its first idea -> that idea's first kernel.
    term.keys("Down", "Right", "Down", "Right", "Down")
    kernel_id = store.rows("kernels", order_by="id")[0]["id"]
    term.wait_for(f"k{kernel_id} · CUDA", "__global__")
    term.keys("c")
    term.wait_for(f"k{kernel_id} · Python", "import torch")
    term.keys("x")
    term.wait_for(f"✂ k{kernel_id}")
    assert store.get("kernels", kernel_id)["pruned"] == 1
    term.keys("q")
    term.wait_for("EXIT=0")


def test_problem_argument_opens_its_session_or_the_picker(tmp_path, tmux_factory):
    small_db(tmp_path / "k.db")
    term = tmux_factory(f"--db {tmp_path / 'k.db'} softmax")
    term.wait_for("session 1", "best/round")
    # A library problem without a session yet: the picker, on that problem.
    other = tmux_factory(f"--db {tmp_path / 'k.db'} gelu")
    screen = other.wait_for("New session", "gelu")
    assert "Start (ctrl+s)" in screen
    other.keys("Escape", "q")
    other.wait_for("EXIT=0")


def test_the_new_user_trial_in_a_real_terminal(tmp_path, tmux_factory):
    """Issue 12's trial at 80x24: the footer, prune a kernel with a repair and hide dropped,
    a key that cannot act, quit while kernels compile; a misspelt problem."""
    store = small_db(tmp_path / "k.db")
    parent = store.db.execute("select id, idea_id, problem_id, session_id from kernels "
                              "where idea_id = 1 order by id limit 1").fetchone()
    child = store.add_kernel(parent[2], "# a repair\n", session_id=parent[3],
                             idea_id=parent[1], parent_id=parent[0], origin="repair", attempt=1)
    term = tmux_factory(f"--db {tmp_path / 'k.db'}")
    screen = term.wait_for("session 1", "best/round")
    footer = screen.rstrip("\n").splitlines()[-1]
    assert footer.startswith("q Quit ? Help ^p Palette") and "palettet" not in screen
    term.keys("Down", "Right", "Down", "Right", "Down")
    term.wait_for(f"k{parent[0]} · CUDA")
    term.keys("x", "Right")
    term.wait_for(f"✂ k{child}")
    term.keys("f")
    screen = term.wait_for("hidden")
    assert f"k{child}" not in screen.split("▕")[0] and "Traceback" not in screen
    term.keys("a")                                  # approve: not on a kernel
    term.wait_for("select an idea first")
    # A session with kernels without a verdict: R starts compiling, q asks first.
    term.keys("k", "k", "k")
    term.keys("R")
    term.wait_for("kernels without a")          # the status line: verifying N kernels ...
    term.keys("q")
    term.wait_for("Quit while work is running?", "no verdict")
    term.keys("y")
    term.wait_for("EXIT=0", timeout=30)
    pending = store.db.execute("select count(*) from kernels k where not exists (select 1 from "
                               "evaluations e where e.kernel_id = k.id)").fetchone()[0]
    assert pending >= 1
    # A misspelt problem is one line, and no database appears.
    typo = tmux_factory(f"--db {tmp_path / 'new.db'} softmx")
    screen = typo.wait_for("EXIT=2")
    assert "did you mean softmax" in " ".join(screen.split())
    assert not (tmp_path / "new.db").exists()
