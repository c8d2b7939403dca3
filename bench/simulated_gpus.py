"""How verification scales with GPUs, on simulated ones: nothing in the parent may serialise work
per box rather than per GPU. Runs anywhere (no CUDA): the workers are real, the GPU turn is
workbench.gpu.simulated's (the candidate runs on the CPU for TURN seconds, holding that GPU's
lock). Verified per minute with 1 GPU and with N, and the ratio (ideal: N, once the cores
start workers faster than the GPUs finish turns; on a 2-core box start-up dominates).

usage: python bench/simulated_gpus.py [--gpus N] [--turn SECONDS] [--per-gpu K] [OUT.md]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from workbench.gpu.executor import EvalRequest, EvalSettings
from workbench.gpu.pool import LocalPool
from workbench.gpu.simulated import TOY_CANDIDATE, TOY_PROBLEM
from workbench.gpu.worker import SIMULATED_ENV



def rate(gpus: int, per_gpu: int, cache: Path) -> tuple[float, float]:
    """(verified per minute, wall seconds) for per_gpu candidates per GPU, spares warm first."""
    pool = LocalPool(gpus=list(range(gpus)), cache_dir=cache)
    request = EvalRequest("twice", TOY_PROBLEM, TOY_CANDIDATE, 1e-4, 1e-4, None, 0,
                          settings=EvalSettings())
    try:
        pool.prewarm(request)
        end = time.monotonic() + 300
        while time.monotonic() < end and sum(w.ready.is_set() for w in pool.spares.waiting()) < gpus:
            time.sleep(0.1)
        t0 = time.monotonic()
        verdicts = [f.result() for f in [pool.submit(request) for _ in range(gpus * per_gpu)]]
        wall = time.monotonic() - t0
    finally:
        pool.shutdown(cancel=True)
    done = sum(v["status"] in ("correct", "flagged") for v in verdicts)
    return 60 * done / wall, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--turn", type=float, default=3.0, help="seconds of each GPU turn")
    parser.add_argument("--per-gpu", type=int, default=6, help="candidates per GPU")
    parser.add_argument("out", nargs="?")
    args = parser.parse_args()
    os.environ[SIMULATED_ENV] = str(args.turn)
    cache = Path(tempfile.mkdtemp(prefix="kwb-simgpu-"))
    one, wall1 = rate(1, args.per_gpu, cache)
    many, wall_n = rate(args.gpus, args.per_gpu, cache)
    lines = [f"### Simulated GPUs — {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
             f"{args.per_gpu} candidates per GPU, {args.turn:g} s GPU turns", "",
             "| GPUs | verified/min | wall s |", "|---|---|---|",
             f"| 1 | {one:.1f} | {wall1:.1f} |", f"| {args.gpus} | {many:.1f} | {wall_n:.1f} |",
             "", f"Scaling: {many / one:.2f}x with {args.gpus} GPUs (ideal {args.gpus}x).", ""]
    text = "\n".join(lines)
    target = args.out or (Path(os.environ["OUT"]) / "simulated_gpus.md" if os.environ.get("OUT")
                          else None)
    if target:
        Path(target).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
