"""What every command shares: the --db option, opening the store, kernel ids, one-line failure."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from workbench.store_errors import MAX_ID

db_option = click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
                         help="SQLite database (default: $KERNEL_WORKBENCH_DB or ./kernels.db).")


def _require_sandbox(ctx, param, value: bool) -> None:
    if value:  # the pool reads it too: no worker starts without every layer
        os.environ["KERNEL_WORKBENCH_REQUIRE_SANDBOX"] = "1"


sandbox_option = click.option(
    "--require-sandbox", is_flag=True, expose_value=False, callback=_require_sandbox,
    help="Refuse to evaluate unless every layer of the worker sandbox is available "
         "(also: KERNEL_WORKBENCH_REQUIRE_SANDBOX=1, or [sandbox] require = true in config.toml).")


def check_sandbox() -> str | None:
    """At the start of evaluation: the missing-layer warning (None when complete); one line and
    exit 2 when the full sandbox is required and a layer is missing."""
    from workbench.gpu.sandbox import SandboxError, startup_check

    try:
        return startup_check()
    except SandboxError as e:
        fail(str(e))


def fail(message: str, code: int = 2) -> NoReturn:
    """Bad input ends with one clear line, never a traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def open_store(db_path: str | None, existing: bool = False):
    """The store at --db (or the default); `existing` refuses to create an empty one."""
    from workbench.store import Store, StoreError, default_db_path

    path = default_db_path() if db_path is None else db_path
    if existing and not Path(path).is_file():
        fail(f"{path}: no workbench database there (pass --db PATH or set KERNEL_WORKBENCH_DB)")
    try:
        return Store(path)
    except StoreError as e:
        fail(str(e))


class KernelId(click.ParamType):
    """A kernel id as the app writes it (k3) or as a number (3)."""

    name = "KERNEL_ID"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        digits = str(value).strip().lower().removeprefix("k")
        if not digits.isdigit() or not 1 <= int(digits) <= MAX_ID:
            self.fail(f"{value!r} is not a kernel id (write it as k3 or 3)", param, ctx)
        return int(digits)

