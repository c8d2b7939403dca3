"""`kernel-workbench profile KERNEL_ID`: the kernel's stored evidence and a fresh Nsight Compute
profile of it (the fixed metric set of workbench.gpu.ncu), or one line saying why ncu can't run."""
from __future__ import annotations

import click

from workbench.cli_options import KernelId, db_option, fail, open_store


@click.command()
@click.argument("kernel_id", type=KernelId())
@db_option
@click.option("--gpu", type=int, default=None, help="GPU index to profile on (default: the first).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=300.0,
              show_default=True, help="Seconds before ncu is killed (it replays each kernel).")
@click.option("--no-ncu", is_flag=True, help="Only show the evidence already stored.")
def profile(kernel_id: int, db_path: str | None, gpu: int | None, timeout_s: float,
            no_ncu: bool) -> None:
    """Show a kernel's hardware evidence and profile it with Nsight Compute."""
    from workbench import cuda_env
    from workbench.evidence import nsight, report
    from workbench.gpu.pool import default_cache_dir

    store = open_store(db_path, existing=True)
    if store.find("kernels", kernel_id) is None:
        fail(f"no kernel {kernel_id} in {store.path} (the app and `report` list kernel ids)")
    problem = None
    if not no_ncu:
        gpus = [g.index for g in cuda_env.list_gpus()] if gpu is None else [gpu]
        problem = nsight.unavailable(gpus)
        if problem is None:
            click.echo(f"profiling kernel {kernel_id} with Nsight Compute on GPU {gpus[0]} "
                       f"({nsight.OUTSIDE}) ...", err=True)
            problem = nsight.profile_kernel(store, kernel_id, default_cache_dir(), gpus[0],
                                            timeout_s).get("error")
    click.echo(report.text(store, kernel_id))
    if problem:
        click.echo(f"ncu: {problem}" if not problem.startswith("ncu") else problem)
        raise SystemExit(1)
