"""What the verifier daemon and its clients share: where it listens, who may talk to it, and the
wire format (one JSON object per line over a unix socket).

One daemon per fingerprint: the workbench code, the Python and torch that run it, the cache it
writes, the GPUs it was asked for and every environment variable or setting a worker sees. A
change to any of them starts a new daemon (the old one exits when idle), so a daemon never
verifies with code or settings the command would not have used.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import workbench
from workbench import cuda_env
from workbench.gpu import sandbox
from workbench.user_dirs import config_file, data_dir

DISABLE_ENV = "KERNEL_WORKBENCH_DAEMON"       # "0": `eval` verifies in its own process
IDLE_ENV = "KERNEL_WORKBENCH_DAEMON_IDLE"     # seconds without work before the daemon exits
DIR_ENV = "KERNEL_WORKBENCH_DAEMON_DIR"       # where sockets live (default: the data directory)
DEFAULT_IDLE_S = 600.0
MAX_LINE = 64 << 20                           # a request carries two sources; a verdict a log tail
# Settings of the daemon itself or of one command, not of the workers it starts.
_NOT_FINGERPRINTED = {DISABLE_ENV, IDLE_ENV, DIR_ENV, "KERNEL_WORKBENCH_DB"}
_SOCKET_PATH_MAX = 107                        # sun_path, less its terminating NUL


class DaemonUnavailable(Exception):
    """No daemon can serve this command; the message says why in one line."""


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "1").lower() not in ("0", "false", "no", "off")


def idle_seconds() -> float:
    try:
        return max(5.0, float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def directory() -> Path:
    """Private to this user (0700), outside every path a sandboxed worker may read: beside the
    verdict key, in the data directory."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    return data_dir() / "daemon"


def code_version() -> str:
    """The workbench's own sources, hashed: an edited checkout never talks to an older daemon."""
    root = Path(workbench.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _worker_environment() -> dict[str, str]:
    names = {k: v for k, v in os.environ.items()
             if k in sandbox.ENV_NAMES or k.startswith(sandbox.ENV_PREFIXES)
             or (k.startswith("KERNEL_WORKBENCH_") and k not in _NOT_FINGERPRINTED)
             or k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "HOME")}
    return dict(sorted(names.items()))


def _config_text() -> str:
    try:
        return config_file().read_text()
    except (OSError, UnicodeDecodeError):
        return ""


@dataclass(frozen=True)
class Address:
    """The files of one daemon: its socket, the token a client must show, the lock it holds for
    its life (its pid inside), the lock clients take to start it, and its log."""
    socket: Path

    @property
    def token(self) -> Path:
        return self.socket.with_suffix(".token")

    @property
    def pidfile(self) -> Path:
        return self.socket.with_suffix(".pid")

    @property
    def startlock(self) -> Path:
        return self.socket.with_suffix(".start")

    @property
    def log(self) -> Path:
        return self.socket.with_suffix(".log")


def address(gpus: list[int] | None, cache_dir: Path) -> Address:
    """The daemon for these GPUs (None: all) and this cache, as this process would run it."""
    fingerprint = json.dumps({
        "code": code_version(), "python": sys.executable, "torch": cuda_env.torch_version(),
        "gpus": sorted(gpus) if gpus else None, "cache": str(cache_dir.resolve()),
        "env": _worker_environment(), "config": _config_text(),
    }, sort_keys=True)
    key = hashlib.sha256(fingerprint.encode()).hexdigest()[:16]
    path = directory() / f"verifier-{key}.sock"
    if len(str(path)) > _SOCKET_PATH_MAX:
        raise DaemonUnavailable(f"the daemon's socket path would be too long for a unix socket "
                                f"({path}); set {DIR_ENV} to a shorter directory")
    return Address(path)


def all_addresses() -> list[Address]:
    """Every daemon this user may have running (or left a socket of)."""
    return [Address(p) for p in sorted(directory().glob("verifier-*.sock"))]


def make_directory() -> Path:
    folder = directory()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    return folder


def peer_is_us(conn: socket.socket) -> bool:
    """The connecting process runs as this user (SO_PEERCRED: pid, uid, gid)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return uid == os.getuid()


class Channel:
    """One JSON object per line, each way."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self._reader = conn.makefile("rb")
        self._sending = threading.Lock()   # phases come from pool threads, verdicts from another

    def send(self, message: dict) -> None:
        data = json.dumps(message).encode() + b"\n"
        with self._sending:
            self.conn.sendall(data)

    def receive(self) -> dict | None:
        """The next message; None at end of stream. A line that is not a JSON object raises
        ValueError."""
        line = self._reader.readline(MAX_LINE)
        if not line:
            return None
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("not a JSON object")
        return message

    def close(self) -> None:
        try:
            self._reader.close()
            self.conn.close()
        except OSError:
            pass
