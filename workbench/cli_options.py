"""Options shared by every command that touches the store (the app's, `run`'s and the rest)."""
import click

db_option = click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
                         help="SQLite database (default: $KERNEL_WORKBENCH_DB or ./kernels.db).")
