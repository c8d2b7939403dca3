"""From a verdict to evidence: achieved fractions of the measured ceilings, the per-kernel time
split with occupancy, and a one-line bottleneck classification."""
from __future__ import annotations

from workbench.evidence import occupancy as occ
from workbench.gpu.resources import base_name

SATURATED = 0.6     # a unit past 60% of its measured ceiling bounds the kernel (speed of light)
BUSY = 0.5          # kernels busy for less than half the call: launches and gaps dominate
CLASSES = ("memory-bound", "compute-bound", "latency-bound", "launch-bound")


def runtime(verdict: dict, flops: int | None, min_bytes: int, dtype: str,
            resources: list[dict] | None = None) -> dict | None:
    """Evidence of one timed evaluation (None when it was not timed)."""
    t = verdict.get("time_ms")
    ceilings = verdict.get("ceilings") or {}
    if not t or not ceilings:
        return None
    rates = ceilings.get("flops_per_s") or {}
    flops_dtype = dtype if dtype in rates else "float32"
    seconds = t * 1e-3
    data = {"time_ms": t, "ci95_ms": verdict.get("ci95_ms"), "device": verdict.get("device"),
            "ceilings": ceilings,
            "ceiling_bytes_per_s": ceilings.get("bytes_per_s"),
            "ceiling_flops_per_s": rates.get(flops_dtype), "flops_dtype": flops_dtype,
            "achieved_bytes_per_s": min_bytes / seconds, "achieved_flops_per_s": None,
            "bandwidth_fraction": None, "flops_fraction": None}
    if data["ceiling_bytes_per_s"]:
        data["bandwidth_fraction"] = data["achieved_bytes_per_s"] / data["ceiling_bytes_per_s"]
    if flops:
        data["achieved_flops_per_s"] = flops / seconds
        if data["ceiling_flops_per_s"]:
            data["flops_fraction"] = data["achieved_flops_per_s"] / data["ceiling_flops_per_s"]
    data.update(kernel_split(verdict.get("launches") or [], verdict.get("device") or {},
                             resources or [], t))
    return data


def kernel_split(launches: list[dict], device: dict, resources: list[dict],
                 time_ms: float) -> dict:
    """Per-kernel rows (time, share, launches, configuration, occupancy) and the call's totals."""
    by_name = {r["name"]: r for r in resources}
    total_us = sum(k["us"] for k in launches)
    rows = []
    for k in launches:
        res = by_name.get(base_name(k["name"]), {})
        regs = k.get("registers") if k.get("registers") is not None else res.get("registers")
        smem = k.get("shared_bytes") if k.get("shared_bytes") is not None \
            else res.get("shared_bytes")
        theo = occ.theoretical(regs, smem, occ.threads_of(k.get("block")), device)
        rows.append({"name": k["name"], "us": k["us"], "launches": k.get("launches", 1),
                     "share": k["us"] / total_us if total_us else None,
                     "grid": k.get("grid"), "block": k.get("block"), "registers": regs,
                     "shared_bytes": smem, "stack_bytes": res.get("stack_bytes"),
                     "own": bool(res),
                     "occupancy": theo["occupancy"] if theo else None,
                     "occupancy_limiter": theo["limiter"] if theo else None,
                     "est_occupancy_pct": k.get("est_occupancy_pct")})
    return {"kernels": rows, "launches": sum(r["launches"] for r in rows),
            "kernel_us": total_us,
            "gpu_busy_fraction": min(1.0, total_us / (time_ms * 1e3)) if launches else None}


def classify(data: dict, ncu: dict | None = None) -> dict:
    """{class, line}: which resource bounds the kernel, with the numbers that say so. Nsight
    Compute's throughputs (% of peak), when present, replace the minimum-bytes estimate."""
    bw, fl = data.get("bandwidth_fraction"), data.get("flops_fraction")
    busy, n = data.get("gpu_busy_fraction"), data.get("launches") or 0
    t = data["time_ms"]
    figures = _figures(data)
    if busy is not None and busy < BUSY:
        mean = data["kernel_us"] / n if n else 0.0
        return {"class": "launch-bound",
                "line": f"launch-bound: kernels busy {100 * busy:.0f}% of the {t:.4f} ms call "
                        f"({n} launches, {mean:.1f} us each on average); {figures}"}
    if ncu and ncu.get("dram_pct") is not None and ncu.get("sm_pct") is not None:
        dram, sm = ncu["dram_pct"] / 100, ncu["sm_pct"] / 100
        source = f"ncu: DRAM {100 * dram:.0f}% of peak, SM {100 * sm:.0f}% of peak; {figures}"
        if max(dram, sm) >= SATURATED:
            cls = "memory-bound" if dram >= sm else "compute-bound"
            return {"class": cls, "line": f"{cls}: {source}"}
        return {"class": "latency-bound", "line": f"latency-bound: {source}"}
    if bw is not None and bw >= SATURATED and bw >= (fl or 0):
        return {"class": "memory-bound", "line": f"memory-bound: {figures}"}
    if fl is not None and fl >= SATURATED:
        return {"class": "compute-bound", "line": f"compute-bound: {figures}"}
    occ_text = _occupancy_text(data)
    return {"class": "latency-bound",
            "line": f"latency-bound: neither DRAM nor compute near its ceiling ({figures}"
                    f"{occ_text}): latency, low parallelism or redundant memory traffic"}


def percent(fraction: float) -> str:
    """84%, or 0.3% where a whole percent would read as nothing."""
    return f"{100 * fraction:.0f}%" if fraction >= 0.095 else f"{100 * fraction:.1f}%"


def _figures(data: dict) -> str:
    parts = []
    if data.get("bandwidth_fraction") is not None:
        parts.append(f"{percent(data['bandwidth_fraction'])} of measured DRAM bandwidth "
                     f"({data['achieved_bytes_per_s'] / 1e12:.2f} of "
                     f"{data['ceiling_bytes_per_s'] / 1e12:.2f} TB/s, minimum bytes)")
    if data.get("flops_fraction") is not None:
        parts.append(f"{percent(data['flops_fraction'])} of the {data['flops_dtype']} FLOP "
                     f"ceiling ({data['achieved_flops_per_s'] / 1e12:.1f} of "
                     f"{data['ceiling_flops_per_s'] / 1e12:.1f} TFLOP/s)")
    return ", ".join(parts) or "no ceilings measured"


def _occupancy_text(data: dict) -> str:
    own = [k for k in data.get("kernels", []) if k.get("occupancy") is not None]
    if not own:
        return ""
    top = max(own, key=lambda k: k["us"])
    return (f"; main kernel theoretical occupancy {100 * top['occupancy']:.0f}% "
            f"(limited by {top['occupancy_limiter']})")
