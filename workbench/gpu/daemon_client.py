"""Talking to the verifier daemon (workbench.gpu.daemon): find it, start it, evaluate through it.

`eval` asks the daemon of its fingerprint (workbench.gpu.daemon_link) and starts one when none
answers, detached from the command, its output in a log beside its socket. Anything that keeps a
daemon from serving raises DaemonUnavailable with one line; the caller then verifies in its own
process, as before the daemon existed.
"""
from __future__ import annotations

import fcntl
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from workbench.gpu.daemon import encode
from workbench.gpu.daemon_link import (Address, Channel, DaemonUnavailable, address,
                                       all_addresses, code_version, make_directory)
from workbench.gpu.executor import EvalRequest, EvaluationCancelled
from workbench.gpu.sandbox import package_root

START_TIMEOUT_S = 60.0    # the daemon's own start: imports and GPU listing, no torch
HELLO_TIMEOUT_S = 30.0    # for the daemon's first answer
CANCEL_WAIT_S = 15.0      # after Ctrl-C, for the daemon to say the worker is dead
# Never handed to the daemon: it needs no provider key, and its workers get an allowlist anyway.
_SECRET = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_PASSWORD|SECRET_ACCESS_KEY)$|^OPENAI_|^GEMINI_|"
                     r"^GOOGLE_API")


class Connection:
    def __init__(self, address: Address, channel: Channel, hello: dict, started: bool) -> None:
        self.address = address
        self.channel = channel
        self.pid: int = hello["pid"]
        self.gpus: list[int] = hello["gpus"]
        self.started = started    # this command started the daemon


def _open(addr: Address, op: str, **fields) -> tuple[Channel, dict]:
    """Connect and say hello; raises OSError or DaemonUnavailable."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(addr.socket))
        token = addr.token.read_text().strip()
    except OSError:
        conn.close()
        raise
    channel = Channel(conn)
    try:
        conn.settimeout(HELLO_TIMEOUT_S)   # a daemon that accepts and then says nothing
        channel.send({"op": op, "token": token, **fields})
        reply = channel.receive()
        conn.settimeout(None)
    except (OSError, ValueError) as e:
        channel.close()
        raise DaemonUnavailable(f"the verifier daemon at {addr.socket} did not answer: "
                                f"{e}") from None
    if not reply or "hello" not in reply:
        channel.close()
        raise DaemonUnavailable(f"the verifier daemon at {addr.socket} refused: "
                                f"{(reply or {}).get('error', 'no answer')}")
    return channel, reply["hello"]


def _spawn(addr: Address, gpus: list[int] | None, cache_dir: Path,
           idle_s: float) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root(), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "workbench.gpu.daemon", str(addr.socket),
               "--cache-dir", str(cache_dir), "--idle", str(idle_s)]
    for gpu in gpus or []:
        command += ["--gpu", str(gpu)]
    with open(addr.log, "w") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=str(addr.socket.parent),
                                start_new_session=True, close_fds=True)


def connect(gpus: list[int] | None, cache_dir: Path, op: str, idle_s: float,
            **fields) -> Connection:
    """A connection to this fingerprint's daemon, starting it when none answers (one starter at
    a time: the others wait for it and use the same daemon)."""
    addr = address(gpus, cache_dir)
    try:
        return Connection(addr, *_open(addr, op, **fields), started=False)
    except OSError:
        pass   # none answers: start one
    try:
        make_directory()
        with open(addr.startlock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return Connection(addr, *_open(addr, op, **fields), started=False)
            except OSError:
                pass   # none, or a socket left by a daemon that was killed
            daemon = _spawn(addr, gpus, cache_dir, idle_s)
            end = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < end:
                time.sleep(0.05)
                if daemon.poll() is not None:
                    raise DaemonUnavailable(f"the verifier daemon exited as it started "
                                            f"({_last_line(addr.log)}; its log: {addr.log})")
                try:
                    connection = Connection(addr, *_open(addr, op, **fields), started=True)
                except OSError:
                    continue
                _retire_superseded(addr)
                return connection
    except OSError as e:
        raise DaemonUnavailable(f"cannot start the verifier daemon in {addr.socket.parent}: "
                                f"{e.strerror or e}") from None
    raise DaemonUnavailable(f"the verifier daemon did not start within {START_TIMEOUT_S:.0f} s "
                            f"(its log: {addr.log})")


def evaluate(connection: Connection, request: EvalRequest,
             on_phase: Callable[[str, str], None] | None = None) -> dict:
    """The verdict, with the phases reported as they come. Ctrl-C cancels the evaluation (the
    daemon kills its worker) and raises EvaluationCancelled once the daemon says so."""
    channel = connection.channel
    try:
        while True:
            message = channel.receive()
            if message is None:
                raise DaemonUnavailable(f"the verifier daemon stopped before a verdict "
                                        f"(its log: {connection.address.log})")
            if "phase" in message and on_phase:
                on_phase(request.label, message["phase"])
            elif "verdict" in message:
                return message["verdict"]
            elif "cancelled" in message:
                raise EvaluationCancelled(f"{request.label or 'evaluation'}: cancelled")
            elif "error" in message:
                raise DaemonUnavailable(f"the verifier daemon: {message['error']} "
                                        f"(its log: {connection.address.log})")
    except KeyboardInterrupt:
        _cancel(channel)
        raise EvaluationCancelled(f"{request.label or 'evaluation'}: cancelled") from None
    except (OSError, ValueError) as e:
        raise DaemonUnavailable(f"lost the verifier daemon: {e} "
                                f"(its log: {connection.address.log})") from None
    finally:
        channel.close()


def _cancel(channel: Channel) -> None:
    """Ask for the worker's death and wait until the daemon confirms it (a second Ctrl-C stops
    waiting; closing the connection cancels too)."""
    try:
        channel.send({"op": "cancel"})
        channel.conn.settimeout(CANCEL_WAIT_S)
        while (message := channel.receive()) is not None:
            if "cancelled" in message or "verdict" in message:
                return
    except (OSError, ValueError, KeyboardInterrupt):
        return


def submit(request: EvalRequest, gpus: list[int] | None, cache_dir: Path,
           idle_s: float) -> Connection:
    """Hand a request to the daemon (starting it if need be); read the verdict with evaluate()."""
    return connect(gpus, cache_dir, "eval", idle_s, request=encode(request))


def _ask(addr: Address, op: str) -> dict:
    """One request and its answer ({} when the daemon said nothing more); raises OSError or
    DaemonUnavailable when no daemon answers there."""
    channel, _ = _open(addr, op)
    try:
        return channel.receive() or {}
    except (OSError, ValueError):
        return {}
    finally:
        channel.close()


def running() -> list[tuple[Address, dict | None]]:
    """Each daemon of this user: its status, or None for a socket no daemon answers (removed)."""
    found = []
    for addr in all_addresses():
        try:
            found.append((addr, _ask(addr, "status").get("status")))
        except (OSError, DaemonUnavailable):
            if not _held(addr):
                for path in (addr.socket, addr.token):
                    path.unlink(missing_ok=True)
            found.append((addr, None))
    return found


def stop(addr: Address, wait_s: float = 30.0) -> bool:
    """Ask one daemon to stop and wait until it has (its workers killed); True when it was
    running."""
    try:
        _ask(addr, "stop")
    except (OSError, DaemonUnavailable):
        return False
    end = time.monotonic() + wait_s
    while _held(addr) and time.monotonic() < end:
        time.sleep(0.1)
    return True


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    return lines[-1] if lines else "no output"


def _retire_superseded(ours: Address) -> None:
    """Stop idle daemons running other workbench code (an upgrade or an edited checkout): no
    command will reach them again, and their spares hold GPU memory until they time out."""
    version = code_version()
    for addr, state in running():
        if addr != ours and state and state["version"] != version and not state["in_flight"]:
            stop(addr, wait_s=0)


def _held(addr: Address) -> bool:
    """Is a daemon alive at this address (it holds its pid file locked while it lives)?"""
    try:
        with open(addr.pidfile) as f:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
    except BlockingIOError:
        return True
    except OSError:
        return False
