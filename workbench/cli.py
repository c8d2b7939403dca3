"""The `kernel-workbench` command: the app by default, and headless subcommands."""
from __future__ import annotations

import json
import sys

import click
from click_default_group import DefaultGroup

from workbench.problems import ProblemError, library_paths, load_problem


def fail(message: str, code: int = 2) -> None:
    """Bad input ends with one clear line, never a traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


db_option = click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
                         help="SQLite database (default: $KERNEL_WORKBENCH_DB or ./kernels.db).")


@click.group(cls=DefaultGroup, default="tui", default_if_no_args=True)
@click.version_option(package_name="kernel-workbench")
def main() -> None:
    """kernel-workbench: LLMs write CUDA kernels for PyTorch ops; a verifier you can trust checks them."""


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per problem, in a list.")
def problems(paths: tuple[str, ...], as_json: bool) -> None:
    """List the problem library, or validate and describe the files given."""
    targets = list(paths) or library_paths()
    found, errors = [], []
    for target in targets:
        try:
            found.append(load_problem(target, smoke=bool(paths)))
        except ProblemError as e:
            errors.append(str(e))
    if as_json:
        click.echo(json.dumps([p.summary() for p in found], indent=2))
    else:
        click.echo(f"{'name':<26} {'family':<14} {'dtype':<8} {'GFLOP':>9} {'MB':>8}  inputs")
        for p in found:
            gflop = f"{p.flops / 1e9:.2f}" if p.flops else "-"
            shapes = ", ".join("x".join(map(str, s)) for s in p.input_shapes)
            click.echo(f"{p.name:<26} {p.family:<14} {p.dtype:<8} {gflop:>9} "
                       f"{p.min_bytes / 1e6:>8.1f}  {shapes}")
    for line in errors:
        click.echo(f"error: {line}", err=True)
    if errors:
        sys.exit(2)
