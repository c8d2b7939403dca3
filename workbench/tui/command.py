"""The `tui` command (the default): open the workbench. Textual loads only when it runs."""
from __future__ import annotations

from pathlib import Path

import click

from workbench.cli_options import check_sandbox, db_option, fail, open_store, sandbox_option


@click.command("tui")
@db_option
@sandbox_option
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
    warning = check_sandbox()
    store = open_store(db_path)
    from workbench.tui.app import WorkbenchApp

    app = WorkbenchApp(store, problem=problem)
    if warning:
        app.config.problems.append(warning)  # shown as a notice when the app starts
    app.run()
