"""Helpers shared by the sandbox tests (CPU: test_sandbox.py, GPU: test_gpu_sandbox.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

CANDIDATES = Path(__file__).parent / "candidates"
PROBLEM = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x
    def get_inputs():
        return [torch.randn(8)]
    def get_init_inputs():
        return []
""")
ROOT = Path(__file__).parent.parent
# The checkout first, then what the caller already had (the GPU box's dependencies live there).
FORK_SKIP = "it needs user, PID and network namespaces (KERNEL_WORKBENCH_FORK_SERVER=0 turns it off)"


def forkserver_ok() -> bool:
    from workbench.gpu import sandbox
    return sandbox.support().namespaces


def start_fork_server(pool) -> None:
    """Start the pool's fork server and wait for it; skip where this kernel refuses nested
    namespaces (any other reason it cannot start is a failure)."""
    import pytest

    pool._launcher.submit(pool.forks.start).result()
    if not pool.forks.wait_ready(180) and "nested namespaces are refused" in pool.forks.reason:
        pytest.skip(pool.forks.reason)
    assert pool.forks.ready(), pool.forks.reason


PYTHONPATH = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])


def hostile_request(source: str, **settings):
    """A no-GPU evaluation of `source` against the identity problem above."""
    from workbench.gpu.executor import EvalRequest, EvalSettings

    return EvalRequest("p", PROBLEM, source, 1e-4, 1e-4, None, 0,
                       settings=EvalSettings(no_gpu=True, **settings), label="hostile")


def source(name: str, **subs: str) -> str:
    """A candidate's text with its __KEY__ placeholders filled in."""
    text = (CANDIDATES / f"{name}.py").read_text()
    for key, value in subs.items():
        text = text.replace(f"__{key}__", value)
    return text


def pids_with(text: str) -> list[int]:
    """Processes (other than this one) whose command line contains `text`."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if text.encode() in (p / "cmdline").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def alive(pid: int) -> bool:
    """Running, not a zombie waiting a moment for the host's init to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pids_in(directory: Path, keep: Path | None = None) -> list[int]:
    """Live processes working in or naming a path under `directory` (ninja names none: its
    cwd), except those working in `keep` (a pool's fork server, which outlives verdicts)."""
    pids = set(pids_with(str(directory)))
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and os.readlink(p / "cwd").startswith(str(directory)):
                pids.add(int(p.name))
        except OSError:
            pass
    return sorted(pid for pid in pids if alive(pid) and not _works_in(pid, keep))


def _works_in(pid: int, directory: Path | None) -> bool:
    try:
        return directory is not None and os.readlink(f"/proc/{pid}/cwd") == str(directory)
    except OSError:
        return False


def left_in(directory: Path, grace_s: float = 5.0, keep: Path | None = None) -> list[int]:
    """pids_in(directory) once the kernel has had `grace_s` to finish killing a namespace: when
    its PID 1 exits the rest get SIGKILL at once, but die (and are reaped) a moment later."""
    deadline = time.monotonic() + grace_s
    while (left := pids_in(directory, keep)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def sandbox_reason(verdict: dict) -> str:
    return next(f["reason"] for f in verdict["flags"] if f["kind"] == "sandbox")


def kinds(verdict: dict) -> set[str]:
    return {f["kind"] for f in verdict["flags"]}


def cli_eval(tmp_path: Path, candidate_source: str, env_extra: dict,
             *flags: str) -> tuple[dict, Path]:
    """`kernel-workbench eval silu` of a candidate in a fresh process (so its environment is the
    parent's initial one); the candidate's __DB__ becomes the database path."""
    db, cand = tmp_path / "k.db", tmp_path / "cand.py"
    cand.write_text(candidate_source.replace("__DB__", str(db)))
    env = {**os.environ, "PYTHONPATH": PYTHONPATH,
           "KERNEL_WORKBENCH_CACHE": str(tmp_path / "cache"), **env_extra}
    out = subprocess.run([sys.executable, "-m", "workbench", "eval", "silu", str(cand), "--json",
                          "--db", str(db), *flags], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.stdout, out.stderr
    return json.loads(out.stdout), db
