"""The `kernel-workbench` command: the app by default, and headless subcommands."""
from __future__ import annotations

import json
import sys

import click
from click_default_group import DefaultGroup

from workbench.cli_options import KernelId, check_sandbox, db_option, fail, open_store, sandbox_option
from workbench.problems import ProblemError, library_paths, load_problem


class WorkbenchGroup(DefaultGroup):
    """A database that fails mid-command (full disk, read-only, damaged) ends in one line."""

    def invoke(self, ctx: click.Context):
        from workbench.store import StoreError

        try:
            return super().invoke(ctx)
        except StoreError as e:
            fail(str(e))


@click.group(cls=WorkbenchGroup, default="tui", default_if_no_args=True)
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


@main.command()
@click.argument("kernel_id", type=KernelId())
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory to write the export into.")
@click.option("--force", is_flag=True, help="Overwrite files in a non-empty --out.")
@click.option("--allow-unverified", is_flag=True,
              help="Export a kernel whose latest verdict is not correct (or is flagged).")
@db_option
def export(kernel_id: int, out_dir: str, force: bool, allow_unverified: bool,
           db_path: str | None) -> None:
    """Write a kernel's sources, KernelBench solution, installable extension and report."""
    from workbench.export import ExportError, export_kernel

    store = open_store(db_path, existing=True)
    try:
        result = export_kernel(store, kernel_id, out_dir, force=force,
                               allow_unverified=allow_unverified)
    except ExportError as e:
        fail(f"{e}; pass --allow-unverified to export it anyway" if e.overridable else str(e))
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"exported kernel {kernel_id} to {result.out_dir} ({len(result.files)} files)")
    if result.module:
        click.echo(f"install: cd {result.out_dir} && pip install --no-build-isolation .   "
                   f"then: import {result.module}")


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@db_option
def report(selectors: tuple[str, ...], as_json: bool, db_path: str | None) -> None:
    """Best kernel per problem, speedup by round and fast_p, for sessions (ids) or problems."""
    from workbench.report import ReportError, build_report, render_text

    store = open_store(db_path, existing=True)
    try:
        data = build_report(store, list(selectors))
    except ReportError as e:
        fail(str(e))
    click.echo(json.dumps(data, indent=2) if as_json else render_text(data), nl=as_json)


@main.command("eval")
@click.argument("problem")
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as one JSON object.")
@click.option("--gpu", "gpus", type=int, multiple=True, help="GPU index to use (repeatable).")
@click.option("--no-gpu", is_flag=True, help="Compile and run the static guards only.")
@click.option("--compile-timeout", "compile_timeout_s", type=click.FloatRange(1), default=300.0,
              show_default=True, help="Seconds the build may take before the verdict is "
                                      "`timeout`.")
@click.option("--atol", type=click.FloatRange(0), default=None,
              help="Override the problem's absolute tolerance.")
@click.option("--rtol", type=click.FloatRange(0), default=None,
              help="Override the problem's relative tolerance.")
@click.option("--trials", type=click.IntRange(5, 100), default=6, show_default=True)
@click.option("--time-budget", type=click.FloatRange(0, min_open=True), default=4.0, show_default=True,
              help="Seconds of A/B timing before the loop stops without reaching its CI target.")
@click.option("--baseline", type=click.Choice(["default", "strict", "tf32"]), default="default",
              show_default=True,
              help="Math settings eager and torch.compile are timed under (default: PyTorch's, "
                   "cuDNN TF32 on). Correctness is always strict fp32.")
@click.option("--retime", is_flag=True,
              help="Evaluate again even when the same source (comments and layout aside) has a "
                   "verdict under the same settings; without it that verdict is reused.")
@click.option("--no-daemon", is_flag=True,
              help="Verify in this process, not through the verifier daemon (see "
                   "`kernel-workbench daemon --help`).")
@db_option
@sandbox_option
def eval_command(problem: str, candidate: str, as_json: bool, gpus: tuple[int, ...],
                 no_gpu: bool, compile_timeout_s: float, atol: float | None,
                 rtol: float | None, trials: int, time_budget: float, baseline: str,
                 retime: bool, no_daemon: bool, db_path: str | None) -> None:
    """Compile, check and time CANDIDATE.py (a KernelBench solution defining ModelNew) against
    PROBLEM (a library name or a path). Exit code 0: correct (or unverified with --no-gpu);
    1: any other verdict; 2: bad input."""
    from pathlib import Path

    from workbench.gpu.executor import EvalSettings
    from workbench.gpu.verdict import describe
    from workbench.gpu.verifier import record, request_for, reused_verdict

    from workbench import problem_cache

    try:
        prob = problem_cache.load(problem, smoke=False)  # no torch here when validated before
    except ProblemError as e:
        fail(str(e))
    try:
        source = Path(candidate).read_text()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{candidate}: cannot read the candidate: {e}")
    warning = check_sandbox()
    if warning:
        click.echo(warning, err=True)
    store = open_store(db_path)
    kernel_id = store.add_kernel(store.upsert_problem(prob), source, origin="file")
    settings = EvalSettings(atol=atol, rtol=rtol, trials=trials, time_budget_s=time_budget,
                            no_gpu=no_gpu, compile_timeout_s=compile_timeout_s,
                            baseline=baseline)

    def progress(label: str, phase: str) -> None:
        if not as_json:
            click.echo(f"[{label}] {phase.replace('_', ' ')}", err=True)

    request = request_for(prob, source, settings, label=f"kernel {kernel_id}")
    verdict = None if retime else reused_verdict(store, request)
    if verdict is None:
        verdict = _verify(request, gpus, no_gpu, as_json, progress, daemon=not no_daemon)
    elif not as_json:
        click.echo(f"same source as evaluation {verdict['reused_from']}: its verdict is reused "
                   "(--retime to evaluate again)", err=True)
    record(store, kernel_id, verdict)
    verdict["kernel_id"] = kernel_id
    if as_json:
        click.echo(json.dumps(verdict))
    else:
        click.echo(f"kernel {kernel_id} on {prob.name}")
        click.echo(describe(verdict))
    sys.exit(0 if verdict["status"] in ("correct", "unverified") else 1)


def _verify(request, gpus: tuple[int, ...], no_gpu: bool, as_json: bool, progress,
            daemon: bool) -> dict:
    from workbench.gpu import daemon_link
    from workbench.gpu.pool import LocalPool

    if daemon and daemon_link.enabled():
        try:
            return _verify_by_daemon(request, gpus, no_gpu, as_json, progress)
        except daemon_link.DaemonUnavailable as e:
            click.echo(f"note: {e}; verifying in this process", err=True)
    pool = LocalPool(gpus=list(gpus) or None, on_phase=progress, spares=False)
    if not pool.gpus and not no_gpu and not as_json:
        click.echo("no GPU found: building and running the static guards only", err=True)
    try:
        verdict = pool.submit(request).result()
    except KeyboardInterrupt:
        pool.shutdown(cancel=True)
        fail("interrupted; the worker was killed", code=130)
    pool.shutdown()
    return verdict


def _verify_by_daemon(request, gpus: tuple[int, ...], no_gpu: bool, as_json: bool,
                      progress) -> dict:
    """Through the verifier daemon, which keeps workers warm between commands; raises
    DaemonUnavailable when none can serve."""
    from workbench.gpu import daemon_client, daemon_link
    from workbench.gpu.executor import EvaluationCancelled
    from workbench.gpu.pool import default_cache_dir

    idle_s = daemon_link.idle_seconds()
    try:
        connection = daemon_client.submit(request, list(gpus) or None, default_cache_dir(),
                                          idle_s)
        if connection.started and not as_json:
            click.echo(f"started the verifier daemon (pid {connection.pid}): it keeps workers "
                       f"warm for the next eval and exits after {_duration(idle_s)} without "
                       "work; `kernel-workbench daemon stop` ends it", err=True)
        if not connection.gpus and not no_gpu and not as_json:
            click.echo("no GPU found: building and running the static guards only", err=True)
        return daemon_client.evaluate(connection, request, progress)
    except EvaluationCancelled:
        fail("interrupted; the worker was killed", code=130)
    except KeyboardInterrupt:   # before the daemon had the candidate (or it is dropped with us)
        fail("interrupted; nothing was verified", code=130)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


# The default command (`kernel-workbench [--db PATH] [PROBLEM]`): the Textual app, loaded lazily.
from workbench.tui.command import tui  # noqa: E402

main.add_command(tui)

# `run`: the search loop, headless (heavy imports inside the command).
from workbench.headless import run  # noqa: E402

main.add_command(run)

# `profile`: a kernel's hardware evidence, with Nsight Compute where it can run.
from workbench.evidence.command import profile  # noqa: E402

main.add_command(profile)

# `daemon status|stop`: the verifier daemon eval shares.
from workbench.daemon_cli import daemon  # noqa: E402

main.add_command(daemon)

# bank, lesson, fork, compare: the population of kernels and sessions.
from workbench.population_cli import COMMANDS  # noqa: E402

for command in COMMANDS:
    main.add_command(command)


@main.command()
def doctor() -> None:
    """Check Python, torch, nvcc, CUDA_HOME, ninja, GPUs and provider keys; exit 1 on problems."""
    from workbench.doctor import KEY_VARS, run_checks

    checks = run_checks()
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
    for c in checks:
        click.echo(f"[{marks[c.status]}] {c.name:<26} {c.detail}")
        if c.status == "fail" or (c.status == "warn" and c.name not in KEY_VARS):
            click.echo(f"       fix: {c.fix}")
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        click.echo(f"{len(failed)} problem(s) found", err=True)
        sys.exit(1)
