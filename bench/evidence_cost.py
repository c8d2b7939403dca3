"""What hardware evidence costs per kernel, on the GPU box: the build-time extra (cuobjdump
-res-usage on the built extension, in the parent), the profiler pass inside the timed
evaluation (kernel launches with grid/block/registers from the Kineto trace), and one Nsight
Compute profile of the kernel (the `profile` command's metric set). Writes a Markdown table.

usage: python bench/evidence_cost.py OUT.md
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from workbench.evidence import nsight
from workbench.gpu import resources
from workbench.gpu.executor import EvalSettings
from workbench.gpu.pool import LocalPool
from workbench.gpu.verifier import record, request_for
from workbench.problems import load_problem
from workbench.store import Store

HERE = Path(__file__).resolve().parent.parent / "tests" / "candidates"
CANDIDATES = [("silu", "silu_honest.py"), ("softmax", "softmax_honest.py")]


def main(out: Path) -> None:
    store = Store(out.with_suffix(".db"))
    pool = LocalPool()
    rows = ["| problem | time ms | class | cuobjdump s | profiler pass s | ncu s | ncu DRAM % "
            "| ncu vs verifier bandwidth |", "|---|---|---|---|---|---|---|---|"]
    try:
        for name, file in CANDIDATES:
            problem = load_problem(name, smoke=False)
            source = (HERE / file).read_text()
            kid = store.add_kernel(store.upsert_problem(problem), source)
            verdict = pool.submit(request_for(problem, source, EvalSettings())).result()
            record(store, kid, verdict)
            t = time.perf_counter()
            resources.resource_usage(resources.built_objects(pool.cache_dir, verdict["cache_key"]))
            cuobjdump_s = time.perf_counter() - t
            why = nsight.unavailable(pool.gpus)
            result = {"error": why} if why else nsight.profile_kernel(
                store, kid, pool.cache_dir, pool.gpus[0])
            data = result.get("data") or {}
            v = data.get("verifier") or {}
            p = store.kernel_profiles(kid)
            rows.append(
                f"| {name} | {verdict.get('time_ms') or float('nan'):.4f} "
                f"| {p['bottleneck']['data']['class'] if 'bottleneck' in p else verdict['status']} "
                f"| {cuobjdump_s:.3f} | {(verdict.get('phase_s') or {}).get('profile', float('nan')):.3f} "
                f"| {data.get('seconds', float('nan')):.1f} "
                f"| {(data.get('main') or {}).get('dram_pct') or float('nan'):.1f} "
                f"| {_agreement(v) if v else result.get('error', '-')} |")
            print(rows[-1], flush=True)
    finally:
        pool.shutdown()
    out.write_text("\n".join(rows) + "\n")


def _agreement(v: dict) -> str:
    return (f"ncu {100 * v['ncu_bandwidth_fraction']:.0f}% vs verifier "
            f"{100 * v['bandwidth_fraction']:.0f}% of {v['ceiling_bytes_per_s'] / 1e12:.2f} TB/s "
            f"({v['dram_bytes_over_minimum']:.2f}x minimum bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
