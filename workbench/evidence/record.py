"""Store the evidence a verdict carries as `profiles` rows (called where verdicts are stored)."""
from __future__ import annotations

from workbench.evidence import change, diagnose
from workbench.store import Store


def resources_summary(res: dict) -> str:
    if res.get("error"):
        return f"unavailable: {res['error']}"
    return "; ".join(f"{k['name']}: {k['registers']} regs, {k['shared_bytes']} B smem, "
                     f"{k['stack_bytes']} B stack" for k in res.get("kernels", [])) or "no kernels"


def runtime_summary(data: dict) -> str:
    parts = [f"{data['time_ms']:.4f} ms", f"{data['launches']} launches"]
    if data.get("bandwidth_fraction") is not None:
        parts.append(f"{100 * data['bandwidth_fraction']:.0f}% of DRAM bandwidth")
    if data.get("flops_fraction") is not None:
        parts.append(f"{100 * data['flops_fraction']:.0f}% of {data['flops_dtype']} FLOP/s")
    return ", ".join(parts)


def store_verdict(store: Store, kernel_id: int, evaluation_id: int, verdict: dict) -> None:
    """Rows for what the build (resources) and the timed run (runtime, bottleneck) showed."""
    res = verdict.get("resources")
    if res:
        store.add_profile(kernel_id, "resources", res, resources_summary(res), evaluation_id)
    problem = store.kernel_problem(kernel_id)
    data = diagnose.runtime(verdict, problem["flops"], problem["min_bytes"] or 0,
                            problem["dtype"] or "float32", (res or {}).get("kernels"))
    if data is None:
        return
    store.add_profile(kernel_id, "runtime", data, runtime_summary(data), evaluation_id)
    ncu = store.kernel_profiles(kernel_id).get("ncu")
    verdict_class = diagnose.classify(data, ncu["data"] if ncu else None)
    store.add_profile(kernel_id, "bottleneck", verdict_class, verdict_class["line"], evaluation_id)
    kernel = store.get("kernels", kernel_id)
    parent = store.kernel_profiles(kernel["parent_id"]) if kernel["parent_id"] else {}
    if "runtime" in parent:
        pclass = parent["bottleneck"]["data"]["class"] if "bottleneck" in parent else None
        diff = change.compare(kernel["parent_id"], store.get("kernels", kernel["parent_id"])["source"],
                              kernel["source"], parent["runtime"]["data"], data, pclass,
                              verdict_class["class"])
        store.add_profile(kernel_id, "change", diff, diff["summary"], evaluation_id)
