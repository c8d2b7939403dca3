"""The verifier daemon `eval` shares: started once, reused, stopped, replaced, refused, bypassed.

Real processes throughout (the CLI, the daemon, its workers), with a simulated GPU turn
(workbench.gpu.simulated) so no CUDA is needed.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from workbench.gpu import daemon_link, sandbox
from workbench.gpu.daemon_link import Address, Channel
from workbench.gpu.simulated import TOY_CANDIDATE, TOY_PROBLEM

from sandbox_support import alive
from test_pool_workers import wait_for

HANG_AT_IMPORT = "import time\ntime.sleep(3600)\n" + TOY_CANDIDATE
STARTED = re.compile(r"started the verifier daemon \(pid (\d+)\)")


@pytest.fixture
def world(tmp_path, monkeypatch) -> dict:
    """Files and an environment of the test's own; the daemon switched on (conftest leaves it
    off for every other test)."""
    # Short: a unix socket's path has at most 107 bytes, and pytest's tmp_path can be long.
    sockets = Path(tempfile.mkdtemp(prefix="kwb-", dir="/tmp"))
    (tmp_path / "toy.py").write_text(TOY_PROBLEM)
    (tmp_path / "honest.py").write_text(TOY_CANDIDATE)
    (tmp_path / "hang.py").write_text(HANG_AT_IMPORT)
    (tmp_path / "slow.py").write_text(HANG_AT_IMPORT.replace("3600", "6"))
    env = {**os.environ, "KERNEL_WORKBENCH_SIMULATED_GPU": "0.2",
           "KERNEL_WORKBENCH_CACHE": str(tmp_path / "cache"),
           "KERNEL_WORKBENCH_DB": str(tmp_path / "kernels.db"),
           daemon_link.DIR_ENV: str(sockets / "d"), daemon_link.DISABLE_ENV: "1",
           daemon_link.IDLE_ENV: "120"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield {"dir": tmp_path, "env": env, "sockets": sockets / "d"}
    stop = daemon_cmd(env, "stop")
    assert stop.returncode == 0, stop.stderr
    shutil.rmtree(sockets, ignore_errors=True)


def daemon_cmd(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", "daemon", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def eval_cmd(world: dict, candidate: str, *extra: str,
             env: dict | None = None) -> subprocess.Popen:
    d = world["dir"]
    return subprocess.Popen([sys.executable, "-m", "workbench", "eval", str(d / "toy.py"),
                             str(d / candidate), "--gpu", "0", "--retime", *extra],
                            env=env or world["env"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_eval(world: dict, candidate: str = "honest.py", *extra: str,
             env: dict | None = None) -> tuple[int, str, str]:
    proc = eval_cmd(world, candidate, *extra, env=env)
    out, err = proc.communicate(timeout=240)
    return proc.returncode, out, err


def status(world: dict) -> list[dict]:
    return json.loads(daemon_cmd(world["env"], "status", "--json").stdout)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def settled(pid: int, quiet_s: float = 2.0, timeout: float = 60.0) -> set[int]:
    """The daemon's process tree once it stopped changing for quiet_s."""
    last, since, end = descendants(pid), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end and time.monotonic() - since < quiet_s:
        time.sleep(0.2)
        now = descendants(pid)
        if now != last:
            last, since = now, time.monotonic()
    return last


def test_one_daemon_serves_every_eval_and_stops_with_its_workers(world):
    env = {**world["env"], "OPENAI_API_KEY": "sk-test-never-in-the-daemon"}
    # Two commands at once start one daemon between them.
    first = [eval_cmd(world, "honest.py", env=env) for _ in range(2)]
    results = [(p.wait(timeout=240), p.stdout.read(), p.stderr.read()) for p in first]
    starts = [m.group(1) for _, _, err in results for m in [STARTED.search(err)] if m]
    assert len(starts) == 1, [err for _, _, err in results]
    pid = int(starts[0])
    for code, out, err in results:
        assert code == 1 and "status: flagged" in out, err   # the toy candidate has no kernel
        assert "[kernel" in err
    # The next one finds it: no start, the same daemon, the same verdict as in-process.
    code, out, err = run_eval(world)
    assert code == 1 and "status: flagged" in out and not STARTED.search(err), err
    code, alone, err = run_eval(world, "honest.py", "--no-daemon")
    assert code == 1 and "status: flagged" in alone, err
    (state,) = status(world)
    assert state["pid"] == pid and state["served"] == 3 and state["in_flight"] == 0
    # Only this user, only with the token: a private directory and 0600 files.
    addr = Address(next(world["sockets"].glob("verifier-*.sock")))
    assert stat.S_IMODE(addr.socket.parent.stat().st_mode) == 0o700
    for path in (addr.socket, addr.token):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert b"OPENAI_API_KEY" not in Path(f"/proc/{pid}/environ").read_bytes()
    workers = descendants(pid)
    assert workers   # a warm spare waits at least
    assert "stopped 1 verifier daemon" in daemon_cmd(world["env"], "stop").stdout
    assert wait_for(lambda: not alive(pid) and not any(alive(w) for w in workers), 30)
    assert not addr.socket.exists() and not addr.token.exists()
    assert status(world) == []


def test_ctrl_c_kills_the_worker_and_leaves_the_daemon_serving(world):
    code, _, err = run_eval(world)
    pid = int(STARTED.search(err).group(1))
    assert wait_for(lambda: status(world)[0]["spares"] == 1)
    before = settled(pid)
    proc = eval_cmd(world, "hang.py")
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "] compiling" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(lines) + err
    assert "interrupted; the worker was killed" in err
    state = status(world)[0]
    assert state["pid"] == pid and state["in_flight"] == 0
    # Back to a daemon with its spare (the hanging worker gone, a new spare in its place).
    assert wait_for(lambda: len(descendants(pid)) == len(before), 60), (before, descendants(pid))
    assert "cancelled by its command" in Address(next(world["sockets"].glob(
        "verifier-*.sock"))).log.read_text()
    code, out, err = run_eval(world)
    assert code == 1 and "status: flagged" in out, err
    # `daemon stop` while a command waits: the command verifies in its own process instead.
    proc = eval_cmd(world, "slow.py")
    for line in proc.stderr:
        if "] compiling" in line:
            break
    daemon_cmd(world["env"], "stop")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1 and "status: flagged" in out, err
    assert "stopped before a verdict" in err and "verifying in this process" in err, err


def test_a_killed_daemon_is_replaced_and_an_idle_one_exits(world):
    code, _, err = run_eval(world)
    pid = int(STARTED.search(err).group(1))
    assert wait_for(lambda: status(world)[0]["spares"] == 1)
    workers = descendants(pid)
    os.kill(pid, signal.SIGKILL)
    # Its workers die with it (no worker outlives its pool); its socket stays behind.
    assert wait_for(lambda: not any(alive(w) for w in workers), 30)
    addr = Address(next(world["sockets"].glob("verifier-*.sock")))
    assert addr.socket.exists()
    short = {**world["env"], daemon_link.IDLE_ENV: "5"}   # not in the fingerprint: same address
    code, out, err = run_eval(world, env=short)
    assert code == 1 and "status: flagged" in out, err
    replacement = int(STARTED.search(err).group(1))
    assert replacement != pid
    # With nothing to do it exits on its own, and takes its files along.
    assert wait_for(lambda: not alive(replacement), 60)
    assert not addr.socket.exists() and not addr.token.exists()
    assert "no work for 5 s: exiting" in addr.log.read_text()


# Run by a candidate in a worker of the daemon it attacks: read the daemon's token, then ask
# the daemon to stop, with the token or without.
ATTACK = """
import json, socket
def _attack(path):
    try:
        token = open(path[:-len(".sock")] + ".token").read().strip()
    except OSError:
        token = "guess"
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        conn.sendall(json.dumps({"op": "stop", "token": token}).encode() + b"\\n")
        conn.recv(4096)
    except OSError:
        pass
_attack(SOCKET)
"""

def test_the_daemon_answers_only_its_token_not_even_its_own_candidates(world):
    code, _, err = run_eval(world)
    assert STARTED.search(err), err
    addr = Address(next(world["sockets"].glob("verifier-*.sock")))

    def ask(*lines: bytes) -> list[dict]:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(addr.socket))
        for line in lines:
            conn.sendall(line)
        conn.shutdown(socket.SHUT_WR)
        channel = Channel(conn)
        replies = []
        while (reply := channel.receive()) is not None:
            replies.append(reply)
        channel.close()
        return replies

    assert ask(b'{"op": "status", "token": "guess"}\n') == [
        {"error": "refused: wrong or missing token"}]
    assert ask(b'{"op": "stop"}\n') == [{"error": "refused: wrong or missing token"}]
    assert ask(b"not json at all\n") == []
    token = addr.token.read_text().strip().encode()
    replies = ask(b'{"op": "eval", "token": "' + token + b'", "request": {"nonsense": 1}}\n')
    assert "cannot read" in replies[-1]["error"]
    (state,) = status(world)   # still serving
    assert state["in_flight"] == 0, state
    if sandbox.support().missing:
        return   # below: what the sandbox stops, where every layer is there to stop it
    # A candidate, in a worker of this daemon, reads the token and asks the daemon to stop.
    pid = state["pid"]
    (world["dir"] / "attack.py").write_text(
        f"SOCKET = {str(addr.socket)!r}\n" + ATTACK + TOY_CANDIDATE)
    code, out, err = run_eval(world, "attack.py")
    assert "status: flagged" in out, err
    (state,) = status(world)
    assert state["pid"] == pid and alive(pid) and state["served"] == 2, state
    assert "stop asked" not in addr.log.read_text(), addr.log.read_text()
    # The same code outside the sandbox does stop it: the payload works, the sandbox stopped it.
    exec(f"SOCKET = {str(addr.socket)!r}\n" + ATTACK, {})
    assert wait_for(lambda: not alive(pid), 30), addr.log.read_text()
    assert "stop asked" in addr.log.read_text()


def test_eval_verifies_in_its_own_process_when_no_daemon_can_start(world):
    blocker = world["sockets"].parent / "f"
    blocker.write_text("")
    env = {**world["env"], daemon_link.DIR_ENV: str(blocker / "d")}
    code, out, err = run_eval(world, env=env)
    assert code == 1 and "status: flagged" in out, err
    assert "note: cannot start the verifier daemon" in err and "verifying in this process" in err
    assert "Traceback" not in err
    # A daemon that dies as it starts (here: its address is locked by another) is noticed as
    # such, not waited for until the start timeout.
    addr = daemon_link.address([0], Path(world["env"]["KERNEL_WORKBENCH_CACHE"]))
    daemon_link.make_directory()
    with open(addr.pidfile, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, out, err = run_eval(world)
    assert code == 1 and "status: flagged" in out, err
    assert "the verifier daemon exited as it started (" in err, err
    assert "another daemon holds this address" in err
    assert status(world) == []
    # KERNEL_WORKBENCH_DAEMON=0: every other test's eval runs so (conftest).


def test_the_address_follows_everything_a_worker_would_see(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    base = daemon_link.address(None, cache)
    assert daemon_link.address(None, cache) == base
    assert daemon_link.address([0], cache) != base
    assert daemon_link.address(None, tmp_path / "other") != base
    monkeypatch.setenv("KERNEL_WORKBENCH_DB", str(tmp_path / "another.db"))
    monkeypatch.setenv(daemon_link.IDLE_ENV, "7")
    assert daemon_link.address(None, cache) == base          # one command's settings
    monkeypatch.setenv("CUDA_HOME", "/opt/another-cuda")
    assert daemon_link.address(None, cache) != base          # what workers get
    monkeypatch.undo()
    monkeypatch.setattr(daemon_link, "code_version", lambda: "edited")
    assert daemon_link.address(None, cache) != base          # other workbench code


def test_a_socket_path_too_long_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv(daemon_link.DIR_ENV, str(tmp_path / ("x" * 120)))
    with pytest.raises(daemon_link.DaemonUnavailable, match="too long for a unix socket"):
        daemon_link.address(None, tmp_path)


def test_a_new_daemon_retires_idle_daemons_of_other_code(monkeypatch, tmp_path):
    from workbench.gpu import daemon_client

    ours, old_idle, old_busy, other_env = (Address(tmp_path / f"verifier-{n}.sock")
                                           for n in ("ours", "old", "busy", "env"))
    version = daemon_link.code_version()
    states = [(ours, {"version": version, "in_flight": 0}),
              (old_idle, {"version": "older", "in_flight": 0}),
              (old_busy, {"version": "older", "in_flight": 1}),    # someone's eval runs there
              (other_env, {"version": version, "in_flight": 0}),   # same code, other settings
              (Address(tmp_path / "verifier-gone.sock"), None)]
    stopped = []
    monkeypatch.setattr(daemon_client, "running", lambda: states)
    monkeypatch.setattr(daemon_client, "stop", lambda addr, wait_s=30.0: stopped.append(addr))
    daemon_client._retire_superseded(ours)
    assert stopped == [old_idle]
