"""One driver per session: while one process drives a session, another's `run --resume` or
engine is refused in one line; once the driver is dead (even kill -9) its lock is taken over."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from llm_server import FakeExecutor, Reply
from test_interrupt import Lines, cli_env  # noqa: F401 - fixture
from test_search_cli import invoke, setup  # noqa: F401 - fixture
from test_search_engine import provider
from workbench import session_lock
from workbench.search import Engine, SearchError
from workbench.store import Store


def _driver(problem: str, base: list[str], db, env) -> tuple[subprocess.Popen, Lines]:
    """A real `run` whose first LLM call hangs: it drives session 1 until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "run", problem, *base, "--no-gpu", "--rounds", "1",
         "--ideas", "1", "--impls", "1", "--db", str(db)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Lines(proc)
    out.wait_for("ideate call for the reference")
    return proc, out


def test_second_driver_refused_then_takes_over_a_dead_one(setup, cli_env, monkeypatch):
    problem, base, db, server = setup
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    env = cli_env[0]
    server.push(Reply(text="never mind", delay_s=120))
    proc, _ = _driver(problem, base, db, env)
    deadline = time.monotonic() + 30
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        result = invoke(["run", "--resume", "1", *base, "--db", str(db)])
        assert result.exit_code == 2
        line = result.output.strip()
        assert "\n" not in line and line.startswith("error: session 1 is being driven by "
                                                    f"another process (pid {proc.pid}: ")
        assert "kernel-workbench run" in line
        assert len(server.requests) == 1          # the refused run asked nothing

        engine = Engine(Store(db), 1, provider(server), FakeExecutor())
        with pytest.raises(SearchError, match="session 1 is being driven by another process"):
            engine.evaluate([])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    # The driver died without unlocking anything: the next one takes over and finishes.
    result = invoke(["run", "--resume", "1", *base, "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "session 1 finished" in result.output


def test_lock_is_reentrant_in_one_process_and_released_by_the_last_holder(tmp_path):
    db = tmp_path / "k.db"
    first = session_lock.acquire(db, 7)
    assert session_lock.acquire(db, 7) == first
    session_lock.release(first)
    probe = ("import sys; from workbench import session_lock as s\n"
             "try:\n    s.acquire(sys.argv[1], 7)\nexcept s.SessionLocked as e:\n"
             "    print(e); sys.exit(3)\n")

    def other_process() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", probe, str(db)], capture_output=True,
                              text=True, timeout=60)

    held = other_process()
    assert held.returncode == 3 and "session 7 is being driven by another process" in \
        held.stdout
    session_lock.release(first)
    t0 = time.monotonic()
    assert other_process().returncode == 0 and time.monotonic() - t0 < 30
    # Another session of the same database is independent.
    assert session_lock.acquire(db, 8)
