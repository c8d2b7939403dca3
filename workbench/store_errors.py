"""Why the database cannot be used, in one line: what, where, what to do.

sqlite3 speaks in exceptions that name neither the file nor a fix ("file is not a database",
"database or disk is full"); the store turns them into StoreError, which every command and the
app show as one line.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

# SQLite row ids are signed 64-bit integers: a larger id is no id, not an overflow.
MAX_ID = 2**63 - 1


class StoreError(Exception):
    """The database cannot be opened, read or written as asked; str() is one line."""


def check_openable(path: Path) -> None:
    """Refuse, before SQLite does in its own words, a path that cannot hold a database."""
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file: pass --db FILE")
    if not path.parent.is_dir():
        raise StoreError(f"{path}: the directory {path.parent} does not exist: create it, or "
                         "pass --db with a path in an existing directory")


def is_read_only(path: Path) -> bool:
    """An existing database this process may read but not write (reports still work on it)."""
    return path.is_file() and not os.access(path, os.W_OK)


def explain(path: Path, error: sqlite3.Error) -> StoreError:
    """The one-line StoreError for an sqlite3 error met while using the database at `path`."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    lower = text.lower()
    if "not a database" in lower or "malformed" in lower or "corrupt" in lower:
        return StoreError(f"{path} is not a kernel-workbench database or is damaged ({text}): "
                          "move it aside to start afresh, or pass another --db")
    if "disk is full" in lower or "disk i/o" in lower:
        return StoreError(f"{path}: {text}; what was being written was not saved (earlier work "
                          f"is intact): free space on {path.parent.resolve()} and retry")
    if "readonly" in lower or "read-only" in lower:
        return StoreError(f"{path} is read-only ({text}): make it writable (chmod u+w), or copy "
                          "it and pass --db COPY; `report` works on it as it is")
    if "locked" in lower or "busy" in lower:
        return StoreError(f"{path} is busy: another kernel-workbench process held its write "
                          "lock too long; retry when that one is done")
    if "unable to open" in lower:
        return StoreError(f"{path}: cannot open the database file: check that you may read and "
                          "write it and its directory")
    return StoreError(f"{path}: {text}")


def newer_schema(path: Path, unknown: list[str]) -> StoreError:
    return StoreError(f"{path} was written by a newer kernel-workbench (schema change "
                      f"{unknown[-1]} is unknown to this one): upgrade kernel-workbench "
                      "(pip install -U .), or pass another --db")
