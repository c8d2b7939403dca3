"""Commands over the population of kernels and sessions: bank, lesson, fork, compare."""
from __future__ import annotations

import json

import click

from workbench.cli_options import KernelId, db_option, fail, open_store


@click.command()
@click.argument("query", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of a table.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N kernels.")
@db_option
def bank(query: tuple[str, ...], as_json: bool, limit: int | None, db_path: str | None) -> None:
    """List verified kernels of every session; QUERY words match problem, family, dtype, shape
    class and techniques, or filter one field: family:matmul dtype:float16 shape:large
    technique:smem problem:softmax."""
    from workbench import bank as kernel_bank

    store = open_store(db_path, existing=True)
    found = kernel_bank.search(store, " ".join(query), limit)
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        click.echo(kernel_bank.format_table(found))


@click.command()
@click.argument("text", required=False)
@click.option("--kernel", "kernel_id", type=KernelId(), help="The kernel the lesson is about.")
@click.option("--family", help="Op family (default: the kernel's problem's).")
@click.option("--list", "list_family", is_flag=True, help="List lessons (of --family, or all).")
@db_option
def lesson(text: str | None, kernel_id: int | None, family: str | None, list_family: bool,
           db_path: str | None) -> None:
    """Record a lesson for later ideation of an op family, e.g.
    `kernel-workbench lesson --kernel 12 "smem index precompute helped"`."""
    from workbench.lessons import LessonError, add_lesson, lessons_for

    store = open_store(db_path, existing=True)
    if list_family or not text:
        for row in lessons_for(store, family, limit=200):
            about = f" (k{row['kernel_id']})" if row["kernel_id"] else ""
            click.echo(f"[{row['family']}] {row['text']}{about}")
        return
    try:
        lesson_id = add_lesson(store, text, family=family, kernel_id=kernel_id)
    except LessonError as e:
        fail(str(e))
    click.echo(f"lesson {lesson_id} recorded for {store.get('lessons', lesson_id)['family']}")


@click.command()
@click.argument("session_id", type=click.IntRange(min=1))
@click.option("--at-round", type=click.IntRange(min=1), required=True,
              help="Keep the rounds before this one; the fork redoes it onward.")
@click.option("--provider", help="Another provider for the fork.")
@click.option("--model", help="Another model for the fork.")
@click.option("--base-url", help="Another API base URL for the fork.")
@click.option("--model-for", "model_for", multiple=True,
              help="ROLE=PROVIDER:MODEL[*WEIGHT][@BASE_URL] for the fork (repeatable).")
@click.option("--seed", "seed_kernels", multiple=True, type=click.IntRange(min=1),
              help="A kernel (any problem's, e.g. from the bank) to seed the fork's next round.")
@click.option("--rounds", type=int, help="Rounds in all (default: the original's).")
@click.option("--top-k", type=int, help="Seeds per round.")
@click.option("--ideas", type=int, help="Ideas per seed.")
@click.option("--impls", type=int, help="Implementations per idea.")
@db_option
def fork(session_id: int, at_round: int, provider: str | None, model: str | None,
         base_url: str | None, model_for: tuple[str, ...], seed_kernels: tuple[int, ...],
         db_path: str | None, **flags) -> None:
    """Fork SESSION at a round with other models or settings; continue it with
    `kernel-workbench run --resume NEW`."""
    from workbench.fork import ForkError, fork_session
    from workbench.search.models import parse_specs

    store = open_store(db_path, existing=True)
    overrides = {k: v for k, v in flags.items() if v is not None}
    for kernel_id in seed_kernels:
        if store.find("kernels", kernel_id) is None:
            fail(f"--seed {kernel_id}: no kernel {kernel_id} in {store.path}")
    if seed_kernels:
        overrides["seed_kernels"] = list(seed_kernels)
    try:
        if model_for:
            overrides["models"] = parse_specs(model_for)
        new_id = fork_session(store, session_id, at_round, overrides, provider=provider,
                              model=model, base_url=base_url)
    except (ForkError, ValueError) as e:
        fail(str(e))
    click.echo(f"session {new_id} forked from session {session_id} at round {at_round}; "
               f"continue with: kernel-workbench run --resume {new_id}")


@click.command()
@click.argument("session_ids", nargs=-1, type=click.IntRange(min=1), required=True)
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of a table.")
@db_option
def compare(session_ids: tuple[int, ...], as_json: bool, db_path: str | None) -> None:
    """Sessions side by side (e.g. a session and its fork): best kernel, fast_1, $ spent."""
    from workbench.fork import ForkError, compare as compare_sessions, render_compare

    store = open_store(db_path, existing=True)
    try:
        rows = compare_sessions(store, list(session_ids))
    except ForkError as e:
        fail(str(e))
    click.echo(json.dumps(rows, indent=2) if as_json else render_compare(rows))


COMMANDS = (bank, lesson, fork, compare)
