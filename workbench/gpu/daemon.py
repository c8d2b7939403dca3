"""The verifier daemon: one long-lived pool that `eval` commands share.

A new `eval` process would pay a worker's start (torch, dynamo and inductor imported: ~14 s on
the H200 box) and the reference's preparation for every verdict. The daemon keeps what a pool
keeps between candidates: the fork server that imported torch once, and a warm spare per GPU and
problem, its reference already prepared. Isolation is the pool's: one sandboxed worker per
candidate, killed after it. The daemon never writes the store; the command that asked records
and seals the verdict.

Started by `eval` (workbench.gpu.daemon_client), detached from it; one per user and fingerprint
(workbench.gpu.daemon_link); exits after a while without work, on SIGTERM, or on `stop`.
Only this user may connect (SO_PEERCRED), and only with the token in a 0600 file of a 0700
directory that no sandboxed worker may read.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import secrets
import select
import signal
import socket
import sys
import threading
import time
from concurrent.futures import CancelledError, Future
from dataclasses import asdict
from pathlib import Path

from workbench.gpu.daemon_link import Address, Channel, code_version, make_directory, peer_is_us
from workbench.gpu.executor import EvalRequest, EvalSettings
from workbench.gpu.pool import LocalPool

HELLO_TIMEOUT_S = 10.0


def encode(request: EvalRequest) -> dict:
    return asdict(request)


def decode(data: dict) -> EvalRequest:
    """Raises TypeError or ValueError on a request this version does not understand."""
    fields = dict(data)
    fields["settings"] = EvalSettings(**fields.get("settings", {}))
    return EvalRequest(**fields)


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", flush=True)


class Daemon:
    def __init__(self, address: Address, pool: LocalPool, idle_s: float) -> None:
        self.address = address
        self.pool = pool
        self.idle_s = idle_s
        self.version = code_version()
        self.token = secrets.token_hex(32)
        self.started = time.time()
        self.served = 0
        self._lock = threading.Lock()
        self._evals = 0                           # evaluations in flight
        self._last = time.monotonic()
        self._count = 0
        self._phases: dict[str, Channel] = {}     # unique label -> the channel it reports to
        self._stop = threading.Event()
        pool.on_phase = self._phase

    # -- life cycle -----------------------------------------------------------------------
    def serve(self, listener: socket.socket) -> None:
        """Accept connections until stopped or idle for idle_s; then kill what runs."""
        listener.settimeout(0.5)
        while not self._stop.is_set():
            with self._lock:
                idle = self._evals == 0 and time.monotonic() - self._last > self.idle_s
            if idle:
                log(f"no work for {self.idle_s:.0f} s: exiting")
                break
            try:
                conn, _ = listener.accept()
            except (socket.timeout, InterruptedError):
                continue
            threading.Thread(target=self._connection, args=(conn,), daemon=True,
                             name="kwb-daemon-conn").start()
        self.pool.shutdown(cancel=True)

    def stop(self) -> None:
        self._stop.set()

    def status(self) -> dict:
        with self._lock:
            busy, last = self._evals, self._last
        forks, spares = self.pool.forks, self.pool.spares.waiting()
        return {"pid": os.getpid(), "version": self.version, "started": self.started,
                "gpus": self.pool.gpus, "served": self.served, "in_flight": busy,
                "spares": len(spares), "spares_ready": sum(w.ready.is_set() for w in spares),
                "fork_server": bool(forks and forks.ready()),
                "idle_exit_in_s": None if busy else
                max(0.0, self.idle_s - (time.monotonic() - last)),
                "log": str(self.address.log)}

    # -- one connection -------------------------------------------------------------------
    def _connection(self, conn: socket.socket) -> None:
        channel = Channel(conn)
        try:
            if not peer_is_us(conn):
                return
            conn.settimeout(HELLO_TIMEOUT_S)   # a connection that says nothing is dropped
            message = channel.receive()
            conn.settimeout(None)
            if not message or not secrets.compare_digest(str(message.get("token", "")),
                                                          self.token):
                channel.send({"error": "refused: wrong or missing token"})
                return
            channel.send({"hello": {"pid": os.getpid(), "version": self.version,
                                    "gpus": self.pool.gpus}})
            op = message.get("op")
            if op == "eval":
                self._eval(channel, message.get("request") or {})
            elif op == "status":
                channel.send({"status": self.status()})
            elif op == "stop":   # before the answer: a client gone after hello still stops it
                log("stop asked")
                self.stop()
                channel.send({"stopping": True})
            else:
                channel.send({"error": f"unknown operation {op!r}"})
        except (OSError, ValueError) as e:
            log(f"connection dropped: {e}")
        finally:
            channel.close()

    def _eval(self, channel: Channel, data: dict) -> None:
        try:
            request = decode(data)
        except (TypeError, ValueError) as e:
            channel.send({"error": f"a request this daemon cannot read: {e}"})
            return
        with self._lock:
            self._count += 1
            self._evals += 1
            shown = request.label
            request.label = f"{shown}#{self._count}"
            self._phases[request.label] = channel
        t0 = time.monotonic()
        try:
            outcome = self._outcome(channel, request)
        finally:
            with self._lock:
                self._phases.pop(request.label, None)
                self._evals -= 1
                self._last = time.monotonic()
        what = outcome["verdict"].get("status") if "verdict" in outcome else \
            "cancelled by its command" if "cancelled" in outcome else outcome["error"]
        log(f"{shown}: {what} ({time.monotonic() - t0:.1f} s)")
        channel.send(outcome)

    def _outcome(self, channel: Channel, request: EvalRequest) -> dict:
        """The message that ends an evaluation: its verdict, `cancelled` when the command asked
        (Ctrl-C), or an error the command answers by verifying in its own process."""
        try:
            future = self.pool.submit(request)
        except RuntimeError:
            return {"error": "the daemon is stopping"}
        asked = self._wait(channel, future)
        if asked:
            self.pool.cancel([future])
        try:
            verdict = future.result()
        except CancelledError:
            return {"cancelled": "cancelled"} if asked else {"error": "stopped before a verdict"}
        except Exception as e:  # noqa: BLE001 - the command gets one line, the log the rest
            log(f"{request.label}: failed: {e!r}")
            return {"error": f"the verifier failed: {e}"}
        with self._lock:
            self.served += 1
        return {"verdict": verdict}

    def _wait(self, channel: Channel, future: Future) -> bool:
        """Until the verdict; True when the command asked to cancel or went away (Ctrl-C)."""
        while not future.done():
            readable, _, _ = select.select([channel.conn], [], [], 0.2)
            if readable:
                try:
                    message = channel.receive()
                except (OSError, ValueError):
                    message = None
                if message is None or message.get("op") == "cancel":
                    return True
        return False

    def _phase(self, label: str, phase: str) -> None:
        with self._lock:
            channel = self._phases.get(label)
        if channel is not None:
            try:
                channel.send({"phase": phase})
            except OSError:
                pass  # the command went away; its evaluation is cancelled by _wait


def _listen(address: Address, token: str) -> socket.socket:
    """The token first (0600), then the socket (0600 by umask): a client that can connect can
    read the token it needs."""
    fd = os.open(address.token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    address.socket.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(address.socket))
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kernel-workbench's verifier daemon")
    parser.add_argument("socket", type=Path)
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--gpu", type=int, action="append", dest="gpus")
    parser.add_argument("--idle", type=float, required=True)
    args = parser.parse_args(argv)
    make_directory()
    address = Address(args.socket)
    lock = open(address.pidfile, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log("another daemon holds this address: exiting")
        return 1
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    pool = LocalPool(gpus=args.gpus, cache_dir=args.cache_dir)
    daemon = Daemon(address, pool, args.idle)
    signal.signal(signal.SIGTERM, lambda *_: daemon.stop())
    signal.signal(signal.SIGINT, lambda *_: daemon.stop())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    listener = _listen(address, daemon.token)
    log(f"listening on {address.socket} (pid {os.getpid()}, GPUs {pool.gpus}, "
        f"exits after {args.idle:.0f} s without work)")
    try:
        daemon.serve(listener)
    finally:
        listener.close()
        for path in (address.socket, address.token):
            path.unlink(missing_ok=True)
        lock.seek(0)
        lock.truncate()
        lock.close()
        log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
