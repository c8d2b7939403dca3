"""The worker sandbox's cost per verdict: the same cached honest candidate evaluated with the full
sandbox and with every layer off (namespaces, Landlock, seccomp; the private build directory and
the allowlisted environment stay), interleaved A/B so drift cancels; no warm spares, so each
verdict pays its worker's launch. Writes a Markdown table.

usage: python bench/sandbox_bench.py [--no-gpu] [--rounds N] OUT.md
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from workbench.gpu import sandbox
from workbench.gpu.executor import EvalSettings
from workbench.gpu.pool import LocalPool
from workbench.gpu.verifier import request_for
from workbench.problems import load_problem

HERE = Path(__file__).resolve().parent.parent / "tests" / "candidates"
FULL = sandbox.support
OFF = sandbox.Support(False, "off for the benchmark", 0, False,
                      ["namespaces", "landlock", "seccomp"])


def one(pool: LocalPool, request) -> tuple[float, float, str, float]:
    """(wall s, s to the worker's first message, status, reference torch.compile s) of a verdict."""
    first: list[float] = []
    pool.on_phase = lambda label, phase: first.append(time.perf_counter()) if not first else None
    t0 = time.perf_counter()
    verdict = pool.submit(request).result()
    compile_s = (verdict.get("phase_s") or {}).get("torch_compile", float("nan"))
    return (time.perf_counter() - t0, (first[0] - t0) if first else float("nan"), verdict["status"],
            compile_s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    settings = EvalSettings(no_gpu=args.no_gpu, time_budget_s=1.0)
    # No spares: a spare would hide the launch (and start in the other mode).
    pool = LocalPool(gpus=[] if args.no_gpu else None, spares=False)
    silu = load_problem("silu", smoke=False)
    request = request_for(silu, (HERE / "silu_honest.py").read_text(), settings, label="bench")
    one(pool, request)  # build once, prepare the cache (PCH, ceilings): not part of the figures
    results: dict[str, list[tuple]] = {"sandbox": [], "no sandbox": []}
    for _ in range(args.rounds):
        for mode, probe in (("sandbox", FULL), ("no sandbox", lambda: OFF)):
            sandbox.support = probe
            results[mode].append(one(pool, request))
    sandbox.support = FULL
    pool.shutdown()
    layers = ", ".join(n for n, ok, _ in sandbox.layers() if ok)
    lines = [f"Sandbox cost per verdict ({'--no-gpu' if args.no_gpu else 'GPU'}, cached "
             f"silu_honest, {args.rounds} interleaved rounds, layers: {layers})", "",
             "| mode | verdict wall s (median, min-max) | submit to first phase s | "
             "reference torch.compile s | statuses |", "|---|---|---|---|---|"]
    for mode, rows in results.items():
        walls, med = [r[0] for r in rows], statistics.median
        lines.append(f"| {mode} | {med(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) | "
                     f"{med(r[1] for r in rows):.3f} | {med(r[3] for r in rows):.2f} | "
                     f"{', '.join(sorted({r[2] for r in rows}))} |")
    cost = statistics.median(r[0] for r in results["sandbox"]) - \
        statistics.median(r[0] for r in results["no sandbox"])
    lines += ["", f"Median cost of the sandbox: {cost:+.2f} s per verdict."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
