"""The `tui` command (the default): open the workbench. Textual loads only when it runs."""
from __future__ import annotations

from pathlib import Path

import click

from workbench.cli_options import db_option, fail, open_store


@click.command("tui")
@db_option
@click.argument("problem", required=False)
def tui(db_path: str | None, problem: str | None) -> None:
    """Open the workbench (optionally on PROBLEM: a library name, a file, or a problem of the
    database)."""
    from workbench.problems import ProblemError, resolve
    from workbench.store import default_db_path

    if problem:
        # Checked before the store opens: a typo must not leave an empty database behind.
        try:
            resolve(problem)
        except ProblemError as e:
            path = Path(db_path) if db_path else default_db_path()
            if not (path.is_file() and open_store(db_path).rows("problems", "name = ?",
                                                                [problem])):
                fail(str(e))
    store = open_store(db_path)
    from workbench.tui.app import WorkbenchApp

    WorkbenchApp(store, problem=problem).run()
