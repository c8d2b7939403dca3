"""`kernel-workbench daemon`: see and stop the verifier daemons `eval` starts."""
from __future__ import annotations

import json
import time

import click


@click.group()
def daemon() -> None:
    """The verifier daemon: a background process `eval` starts and shares, which keeps workers
    warm between commands (torch imported, the reference prepared) and exits after a while
    without work (KERNEL_WORKBENCH_DAEMON_IDLE seconds, default 600; KERNEL_WORKBENCH_DAEMON=0
    or `eval --no-daemon`: none)."""


@daemon.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of lines.")
def status(as_json: bool) -> None:
    """The daemons running for this user."""
    from workbench.gpu import daemon_client

    found = [(addr, state) for addr, state in daemon_client.running() if state]
    if as_json:
        click.echo(json.dumps([state for _, state in found], indent=2))
        return
    if not found:
        click.echo("no verifier daemon is running (eval starts one)")
    for _, s in found:
        left = s["idle_exit_in_s"]
        idle = "busy" if left is None else f"exits in {left:.0f} s idle"
        gpus = ",".join(map(str, s["gpus"])) or "none"
        click.echo(f"pid {s['pid']}: GPUs {gpus}, up {time.time() - s['started']:.0f} s, "
                   f"{s['served']} verdicts, {s['in_flight']} in flight, {s['spares']} warm "
                   f"spares, fork server {'ready' if s['fork_server'] else 'not ready'}, "
                   f"{idle}; log {s['log']}")


@daemon.command()
def stop() -> None:
    """Stop every verifier daemon of this user (their workers are killed)."""
    from workbench.gpu import daemon_client

    stopped = [addr for addr, state in daemon_client.running()
               if state and daemon_client.stop(addr)]
    click.echo(f"stopped {len(stopped)} verifier daemon(s)" if stopped
               else "no verifier daemon is running")
