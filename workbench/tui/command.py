"""The `tui` command (the default): open the workbench. Textual loads only when it runs."""
from __future__ import annotations

import click

from workbench.cli_options import db_option


@click.command("tui")
@db_option
@click.argument("problem", required=False)
def tui(db_path: str | None, problem: str | None) -> None:
    """Open the workbench (optionally on PROBLEM, a library name)."""
    import sqlite3

    from workbench.store import Store

    try:
        store = Store(db_path)
    except (sqlite3.Error, OSError) as e:
        raise click.ClickException(f"cannot open the database {db_path or 'kernels.db'}: {e}")
    from workbench.tui.app import WorkbenchApp

    WorkbenchApp(store, problem=problem).run()
