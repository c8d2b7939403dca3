"""Standalone `eval`, as a user types it (a new process per verdict, the build cached): without
the verifier daemon, the eval that starts it, the next eval of the same problem once the daemon's
spare is ready, a problem new to the daemon, and the same source again (verdict reused). Each
with the seconds between its progress lines.

usage: python bench/standalone_eval.py [OUT.md] [--simulated S]
  on the GPU box: the library's silu and softmax with their honest candidates (builds first);
  --simulated S: no GPU, a toy problem pair and a simulated GPU turn of S seconds
  (workbench.gpu.simulated), for the process and daemon overheads on a CPU machine.
bench/verifier_bench.py runs measure() after its batches, on its warm build cache.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench import cuda_env

ROOT = Path(__file__).resolve().parent.parent
CASES = {"warm": "through the warm daemon, its spare for the problem ready",
         "new": "through the warm daemon, a problem new to it",
         "start": "the eval that starts the daemon",
         "alone": "without the daemon (--no-daemon), problem validated before"}


def run_eval(env: dict, work: Path, problem: str, candidate: Path, *extra: str,
             db: str = "eval.db") -> tuple[float, dict, str]:
    """(wall seconds, seconds per progress segment, verdict status) of one `eval` command."""
    cmd = [sys.executable, "-m", "workbench", "eval", problem, str(candidate), "--db",
           str(work / db), *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    marks = [(0.0, "command start to its first line (CLI, store; without the daemon also the "
                   "worker's start and import torch)")]
    for line in proc.stderr:
        if line.startswith("["):
            marks.append((time.monotonic() - t0, line.split("]", 1)[1].strip()))
        elif line.startswith("started the verifier daemon"):
            marks.append((time.monotonic() - t0, "daemon up, request sent: its first worker "
                                                 "starts (import torch)"))
    out = proc.stdout.read()
    proc.wait()
    wall = time.monotonic() - t0
    marks.append((wall, "exit"))
    segments = {name: t1 - t0_ for (t0_, name), (t1, _) in zip(marks, marks[1:])}
    status = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                   if ln.startswith("status:")), f"exit {proc.returncode}")
    if "torch.compile of the reference failed" in out:   # a verdict short of a baseline
        status += ", no torch.compile baseline"
    return wall, segments, status


def spare_ready(env: dict, timeout: float = 120.0) -> float | None:
    """Seconds until a spare of the daemon is ready (a user editing the kernel between two evals
    gives it that time); None when none was."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        out = subprocess.run([sys.executable, "-m", "workbench", "daemon", "status", "--json"],
                             env=env, capture_output=True, text=True, cwd=ROOT).stdout
        if any(s["spares_ready"] for s in json.loads(out or "[]")):
            return time.monotonic() - t0
        time.sleep(0.5)
    return None


def measure(cache: Path, work: Path, first: tuple[str, Path], second: tuple[str, Path],
            env: dict | None = None, extra: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The result row's text and a phase table per case. `first` and `second`: (problem,
    candidate file) pairs whose builds are in `cache`; `extra`: options for every eval."""
    env = {**(env or os.environ), "KERNEL_WORKBENCH_CACHE": str(cache),
           "KERNEL_WORKBENCH_DAEMON_DIR": str(work / "d"), "KERNEL_WORKBENCH_DAEMON": "1"}
    runs = {}
    try:
        runs["first"] = run_eval(env, work, *first, *extra, "--no-daemon")   # problem new here
        runs["alone"] = run_eval(env, work, *first, *extra, "--no-daemon", "--retime")
        runs["start"] = run_eval(env, work, *first, *extra, "--retime")
        ready = spare_ready(env)
        runs["warm"] = run_eval(env, work, *first, *extra, "--retime")
        runs["new"] = run_eval(env, work, *second, *extra, "--retime")
        runs["again"] = run_eval(env, work, *first, *extra)                 # verdict reused
    finally:
        subprocess.run([sys.executable, "-m", "workbench", "daemon", "stop"], env=env, cwd=ROOT,
                       capture_output=True)
    wall = {k: f"{v[0]:.1f} s ({v[2]})" for k, v in runs.items()}
    waited = "never" if ready is None else f"{ready:.1f} s after the eval that started it"
    row = (f"{wall['warm']} through the verifier daemon (its spare ready {waited}); "
           f"{wall['new']} for a problem new to the daemon; {wall['start']} for the eval that "
           f"starts the daemon; {wall['alone']} without the daemon ({wall['first']} when the "
           f"problem is new to this machine); {wall['again']} for the same source again "
           f"(verdict reused)")
    sections = []
    for key, title in CASES.items():
        sections += [f"Standalone eval, cached build, `--retime`, {title} (seconds from the "
                     "command's start):", "", "| phase | seconds |", "|---|---|",
                     *[f"| {n} | {s:.2f} |" for n, s in runs[key][1].items()], ""]
    return row, sections


def _simulated_pair(work: Path) -> tuple[tuple[str, Path], tuple[str, Path]]:
    from workbench.gpu.simulated import TOY_CANDIDATE, TOY_PROBLEM

    pair = []
    for name, factor in (("twice", "2"), ("thrice", "3")):
        problem, candidate = work / f"{name}.py", work / f"{name}_candidate.py"
        problem.write_text(TOY_PROBLEM.replace("x * 2", f"x * {factor}"))
        candidate.write_text(TOY_CANDIDATE.replace("x * 2", f"x * {factor}"))
        pair.append((str(problem), candidate))
    return pair[0], pair[1]


def _library_pair() -> tuple[tuple[str, Path], tuple[str, Path]]:
    here = ROOT / "tests" / "candidates"
    return ("silu", here / "silu_honest.py"), ("softmax", here / "softmax_honest.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--simulated", type=float, help="seconds of a simulated GPU turn")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kwb-eval-"))
    env = dict(os.environ)
    if args.simulated is not None:
        env["KERNEL_WORKBENCH_SIMULATED_GPU"] = str(args.simulated)
        first, second = _simulated_pair(work)
        gpu = ("--gpu", "0")   # the simulated GPU: `eval` finds none unless asked for one
    else:
        first, second = _library_pair()
        gpu = ()
    cache = work / "cache"
    for problem, candidate in (first, second):   # builds in the cache, as the row says
        run_eval({**env, "KERNEL_WORKBENCH_CACHE": str(cache)}, work, problem, candidate,
                 "--no-daemon", *gpu, db="prime.db")   # no verdict for measure() to reuse
    row, sections = measure(cache, work, first, second, env, gpu)
    commit = os.environ.get("KWB_COMMIT") or subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True,
        text=True, cwd=ROOT).stdout.strip()
    if gpu:
        what = f"toy problems, simulated GPU turn of {args.simulated:g} s"
    else:
        found = cuda_env.list_gpus()
        what = f"silu and softmax, {found[0].name if found else 'no GPU'}"
    text = "\n".join([f"### Standalone eval — {time.strftime('%Y-%m-%d')}, {what}, "
                      f"{os.cpu_count()} cores, commit {commit}", "", row, "", *sections])
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
