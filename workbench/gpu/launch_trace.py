"""What one call launched on the GPU, per kernel: time, launches, grid, block, registers, shared
memory (from the PyTorch profiler's Kineto trace, which CUPTI fills), and the device's limits.
Imports only torch and the standard library (runs inside the GPU worker).
"""
from __future__ import annotations

import json
import os
import tempfile

import torch


def device_info() -> dict:
    """The GPU's name and the limits occupancy and the prompts need."""
    p = torch.cuda.get_device_properties(0)
    return {
        "name": p.name, "arch": f"sm_{p.major}{p.minor}", "sms": p.multi_processor_count,
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "smem_per_sm": getattr(p, "shared_memory_per_multiprocessor", None),
        "smem_per_block_optin": getattr(p, "shared_memory_per_block_optin", None),
        "regs_per_sm": getattr(p, "regs_per_multiprocessor", None),
        "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", None),
        "memory_bytes": p.total_memory, "warp_size": getattr(p, "warp_size", 32),
    }


def profile_launches(fn, args) -> list[dict]:
    """Every kernel one call of fn(*args) ran: [{name, us, grid, block, registers, shared_bytes,
    est_occupancy_pct}] in launch order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="kwb-trace-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    return launches_from_trace(trace)


def launches_from_trace(trace: dict) -> list[dict]:
    """The kernel events of a Kineto chrome trace, in time order."""
    events = [e for e in trace.get("traceEvents", [])
              if e.get("cat") == "kernel" and e.get("ph") == "X"]
    events.sort(key=lambda e: e.get("ts", 0))
    out = []
    for e in events:
        a = e.get("args") or {}
        out.append({"name": e.get("name", "?"), "us": float(e.get("dur") or 0.0),
                    "grid": a.get("grid"), "block": a.get("block"),
                    "registers": a.get("registers per thread"),
                    "shared_bytes": a.get("shared memory"),
                    "est_occupancy_pct": a.get("est. achieved occupancy %")})
    return out


def summarize(launches: list[dict]) -> list[dict]:
    """Launches grouped by kernel name: time, count, and the first launch's configuration."""
    by_name: dict[str, dict] = {}
    for launch in launches:
        row = by_name.get(launch["name"])
        if row is None:
            row = by_name[launch["name"]] = {**launch, "launches": 0, "us": 0.0}
        row["launches"] += 1
        row["us"] += launch["us"]
    return sorted(by_name.values(), key=lambda r: -r["us"])
