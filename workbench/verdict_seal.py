"""Verdict seals: only the verifier's own verdicts count.

The parent process stores a verdict after reading it, nonce-tagged, from the worker's private
pipe, and seals the stored row with an HMAC (SHA-256) under a per-install key. Code that writes
the database any other way (a candidate's orphan, a stray script) cannot produce the seal, so
its rows read as untrusted: the app, `report` and `export` show them as such and never count
them as correct; the search never seeds from them.

The key is a 0600 file in the user's data directory ($XDG_DATA_HOME/kernel-workbench, or
~/.local/share/kernel-workbench), made on first use. The worker is never told where it is: its
environment carries no path to it, and the sandbox does not let it read the data directory.
A database copied to another machine reads as untrusted there unless the key travels with it.

The seal covers every column of the row as stored (SEALED, in this order), so changing any
figure, flag or status breaks it, and the evaluated kernel's source and clearance (KERNEL_SEALED):
a verdict cannot be moved onto other code (the source is what `export` writes), and a flag
counts as cleared only when the store cleared it. A column added later is not covered until a
new seal version lists it (v2 added `reused_from`, v3 the kernel's columns); older seals still
verify over what they covered.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
from pathlib import Path

from workbench.user_dirs import data_dir

KEY_ENV = "KERNEL_WORKBENCH_VERDICT_KEY"   # a path; overrides the default (tests, shared installs)
VERSION = "v3"
SEALED_V1 = ("kernel_id", "build_id", "status", "gpu", "trials", "atol", "rtol", "max_abs_err",
             "max_rel_err", "trial_errors", "time_ms", "ci95_lo_ms", "ci95_hi_ms", "samples",
             "ref_eager_ms", "ref_compile_ms", "speedup_eager", "speedup_compile", "floor_ms",
             "flags", "error", "verdict", "created_at")
# v2 adds which evaluation a reused verdict copies; v1 seals (older rows) still verify.
SEALED = SEALED_V1 + ("reused_from",)
# v3 adds the evaluated kernel's row: what was verified, and whether a person cleared its flags.
KERNEL_SEALED = ("source", "cleared")
SQL_FUNCTION = "kwb_verdict_sealed"

_keys: dict[Path, bytes] = {}
_guard = threading.Lock()


class SealError(Exception):
    """The key cannot be read or made; str() is one line."""


def key_path() -> Path:
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV])
    return data_dir() / "verdict.key"


def _key() -> bytes:
    path = key_path()
    with _guard:
        if path in _keys:
            return _keys[path]
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                key = bytes.fromhex(path.read_text().strip())
            else:
                key = os.urandom(32)
                with os.fdopen(fd, "w") as f:
                    f.write(key.hex() + "\n")
        except (OSError, ValueError) as e:
            raise SealError(f"cannot read or create the verdict key {path}: "
                            f"{getattr(e, 'strerror', None) or e}") from None
        if len(key) < 16:
            raise SealError(f"the verdict key {path} is too short: delete it to make a new one "
                            "(verdicts sealed with it will read as untrusted)")
        _keys[path] = key
        return key


def _mac(values: tuple | list, version: str = VERSION) -> str:
    message = json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)
    return version + ":" + hmac.new(_key(), message.encode(), hashlib.sha256).hexdigest()


def _values(row: dict, kernel: dict) -> list:
    return [row.get(c) for c in SEALED] + [kernel.get(c) for c in KERNEL_SEALED]


def seal(row: dict, kernel: dict) -> str:
    """The seal of an evaluations row and its kernel's row, as stored (read back)."""
    return _mac(_values(row, kernel))


def intact(signature: str | None, *values) -> bool:
    """Whether `signature` seals these values (SEALED, then KERNEL_SEALED); False without a key.
    Older seals cover their own prefix: v1 never saw `reused_from`, v2 never saw the kernel."""
    if not signature:
        return False
    covered = {"v1:": len(SEALED_V1), "v2:": len(SEALED)}.get(signature[:3], len(values))
    try:
        return hmac.compare_digest(signature, _mac(values[:covered], signature[:2]))
    except SealError:
        return False


def row_intact(row: dict, kernel: dict) -> bool:
    return intact(row.get("signature"), *_values(row, kernel))


def sql(alias: str = "e") -> str:
    """A SQL expression, true when the evaluation row `alias` carries a valid seal."""
    kernel = [f"(select {c} from kernels where id = {alias}.kernel_id)" for c in KERNEL_SEALED]
    return f"{SQL_FUNCTION}({alias}.signature, " + \
        ", ".join([f"{alias}.{c}" for c in SEALED] + kernel) + ")"


def register(conn) -> None:
    """Make `sql()` usable on a sqlite3 connection."""
    conn.create_function(SQL_FUNCTION, len(SEALED) + len(KERNEL_SEALED) + 1,
                         lambda signature, *values: int(intact(signature, *values)))


UNTRUSTED = ("its seal does not match: written or changed outside the verifier (or sealed on "
             "another machine, whose key this one lacks)")
