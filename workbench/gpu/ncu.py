"""Nsight Compute: the fixed metric set, finding ncu, whether it may read the GPU's performance
counters, and parsing its CSV (`ncu --csv --page raw`). Standard library only; runs in the parent.

The metric set (all resolve on GH100 with ncu 2025.3; throughputs as % of the hardware peak):
  gpu__time_duration.sum                                         kernel time (ns)
  dram__throughput.avg.pct_of_peak_sustained_elapsed             DRAM throughput
  lts__throughput.avg.pct_of_peak_sustained_elapsed              L2 throughput
  l1tex__throughput.avg.pct_of_peak_sustained_active             L1/TEX throughput
  sm__throughput.avg.pct_of_peak_sustained_elapsed               SM (compute) throughput
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
                                                                 tensor pipe (HMMA and GMMA)
  sm__warps_active.avg.pct_of_peak_sustained_active              achieved occupancy
  sm__maximum_warps_per_active_cycle_pct                         theoretical occupancy
  smsp__inst_executed.sum                                        warp instructions
  dram__bytes.sum, dram__bytes_read.sum, dram__bytes_write.sum   DRAM bytes moved
  launch__grid_size, launch__block_size, launch__registers_per_thread
  smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio
                                                                 warp-stall reasons (cycles per
                                                                 issued instruction)
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

from workbench import cuda_env

STALL_REASONS = ("long_scoreboard", "barrier", "math_pipe_throttle", "mio_throttle",
                 "lg_throttle", "wait", "short_scoreboard", "not_selected", "no_instruction",
                 "dispatch_stall", "drain", "imc_miss", "membar", "sleeping", "tex_throttle",
                 "branch_resolving", "misc")
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
FIGURES = {   # our name -> ncu metric
    "time_ns": "gpu__time_duration.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "tensor_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "warp_instructions": "smsp__inst_executed.sum",
    "dram_bytes": "dram__bytes.sum",
    "dram_bytes_read": "dram__bytes_read.sum",
    "dram_bytes_write": "dram__bytes_write.sum",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "registers": "launch__registers_per_thread",
}
METRICS = [*FIGURES.values(), *(STALL.format(r) for r in STALL_REASONS)]
LABELS = {"dram_pct": "DRAM", "l2_pct": "L2", "l1_pct": "L1/TEX", "sm_pct": "SM",
          "tensor_pct": "tensor pipe", "achieved_occupancy_pct": "achieved occupancy",
          "theoretical_occupancy_pct": "theoretical occupancy"}


def find_ncu() -> str | None:
    return cuda_env.find_tool("ncu")


def counters_restricted(params: Path = Path("/proc/driver/nvidia/params")) -> bool:
    """True when the driver lets only administrators read the performance counters
    (RmProfilingAdminOnly: 1) and this process is not root: ncu then fails with
    ERR_NVGPUCTRPERM."""
    try:
        text = params.read_text()
    except OSError:
        return False
    return "RmProfilingAdminOnly: 1" in text and os.geteuid() != 0


def command(ncu: str, log_file: Path, program: list[str]) -> list[str]:
    """ncu over a program that brackets the call of interest with cudaProfilerStart/Stop.
    Clocks are left as they run (--clock-control none) so figures compare with the verifier's
    timings; caches are flushed between replay passes (the default), like the verifier's L2
    flush."""
    return [ncu, "--csv", "--page", "raw", "--metrics", ",".join(METRICS),
            "--profile-from-start", "off", "--clock-control", "none", "--target-processes",
            "all", "--log-file", str(log_file), *program]


def _number(text: str):
    cleaned = text.replace(",", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        return text.strip() or None


def parse_csv(text: str) -> list[dict]:
    """One dict per profiled kernel: id, name, block, grid, and every metric column (numbers
    with their thousands separators removed). ncu's own lines (==PROF==, ==WARNING==) and the
    units row are skipped."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(lines))
    if not rows or "Kernel Name" not in rows[0]:
        return []
    header = rows[0]
    kernels = []
    for row in rows[1:]:
        record = dict(zip(header, row))
        if not record.get("ID", "").strip():      # the units row
            continue
        kernels.append({"id": int(_number(record["ID"])), "name": record["Kernel Name"],
                        "block": record.get("Block Size"), "grid": record.get("Grid Size"),
                        "metrics": {k: _number(v) for k, v in record.items()
                                    if "__" in k}})
    return kernels


def failure(text: str) -> str | None:
    """ncu's first error line (==ERROR==), or why nothing was profiled, else None."""
    for line in text.splitlines():
        if line.startswith("==ERROR=="):
            return line.removeprefix("==ERROR==").strip()
    if "No kernels were profiled" in text:
        return "no kernels were profiled (the call launched no CUDA kernel inside the range)"
    return None


def summarize(kernel: dict, output_elements: int | None) -> dict:
    """Our figures for one kernel, the top warp-stall reasons, and per-element counts."""
    m = kernel["metrics"]
    out = {"name": kernel["name"], "block": kernel["block"], "grid": kernel["grid"]}
    for ours, metric in FIGURES.items():
        value = m.get(metric)
        out[ours] = value if isinstance(value, float) else None
    stalls = [{"reason": r, "cycles": m[STALL.format(r)]} for r in STALL_REASONS
              if isinstance(m.get(STALL.format(r)), float) and r != "selected"]
    out["stalls"] = sorted(stalls, key=lambda s: -s["cycles"])[:5]
    if output_elements:
        for ours, per in (("warp_instructions", "inst_per_element"),
                          ("dram_bytes", "dram_bytes_per_element")):
            out[per] = out[ours] / output_elements if out[ours] is not None else None
    if out["dram_bytes"] is not None and out["time_ns"]:
        out["dram_bytes_per_s"] = out["dram_bytes"] / (out["time_ns"] * 1e-9)
    return out


def summary(kernels: list[dict], output_elements: int | None) -> dict:
    """All kernels of the call summarized, and the main one (longest)."""
    rows = [summarize(k, output_elements) for k in kernels]
    main = max(rows, key=lambda r: r["time_ns"] or 0.0) if rows else None
    return {"kernels": rows, "main": main, "metrics": METRICS}
