"""Evidence as prompt text: the GPU, and for a kernel and its lineage what the build and the timed
run showed, compactly (tables, one line per kernel). The engineer's choice of evidence kinds and
note for a kernel (store.evidence_choice) filters and extends what a prompt starting there gets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench import cuda_env
from workbench.store import Store

KINDS = ("bottleneck", "runtime", "resources", "ncu", "change")   # attachable pieces
LINEAGE = 4          # ancestors shown with their time and bottleneck
TOP_KERNELS = 4      # kernels listed per call (by time)
TOP_STALLS = 3


@dataclass
class Evidence:
    """The text for a prompt and what it was made of (stored with the LLM call)."""
    text: str
    given: dict = field(default_factory=dict)


def gpu_text(store: Store, problem_id: int) -> str:
    """Name, arch, SMs, per-SM limits, L2 and the measured ceilings, from the latest timed run
    of this problem (else what nvidia-smi says, or that no GPU was seen)."""
    found = store.latest_problem_profile(problem_id, "runtime")
    data = found["data"] if found else {}
    d, c = data.get("device") or {}, data.get("ceilings") or {}
    if not d:
        gpus = cuda_env.list_gpus()
        if not gpus:
            return "No GPU measured yet (ceilings unknown)."
        g = gpus[0]
        return f"{g.name} (compute capability {g.compute_cap}); ceilings not measured yet."
    lines = [f"{d['name']} ({d['arch']}), {d['sms']} SMs; per SM: "
             f"{_kib(d.get('smem_per_sm'))} shared memory, {d.get('regs_per_sm'):,} registers, "
             f"{d.get('max_threads_per_sm')} threads; L2 {_mib(d.get('l2_bytes'))}; "
             f"up to {_kib(d.get('smem_per_block_optin'))} shared memory per block (opt-in)."]
    if c:
        rates = ", ".join(f"{dtype} {rate / 1e12:.1f} TFLOP/s"
                          for dtype, rate in (c.get("flops_per_s") or {}).items())
        lines.append(f"Measured ceilings: DRAM {c['bytes_per_s'] / 1e12:.2f} TB/s (device copy, "
                     f"read + write); dense matmul {rates} (float32 without TF32 on CUDA cores; "
                     "half precision on tensor cores, fp32 accumulation).")
    return "\n".join(lines)


def kernel_text(store: Store, kernel_id: int) -> Evidence:
    """The evidence of a kernel (filtered by the engineer's choice) and its lineage's trend."""
    profiles = store.kernel_profiles(kernel_id)
    choice = store.evidence_choice(kernel_id)
    attached = choice["attached"] if choice else list(KINDS)
    lines: list[str] = []
    if "bottleneck" in attached and "bottleneck" in profiles:
        lines.append(f"Bottleneck: {profiles['bottleneck']['summary']}")
    if "runtime" in attached and "runtime" in profiles:
        lines += runtime_lines(profiles["runtime"]["data"])
    elif "resources" in attached and "resources" in profiles:
        lines.append(f"Build: {profiles['resources']['summary']}")
    if "ncu" in attached and "ncu" in profiles:
        lines += ncu_lines(profiles["ncu"]["data"])
    if "change" in attached and "change" in profiles:
        lines.append(f"Change from its parent: {profiles['change']['summary']}")
    trend = lineage_lines(store, kernel_id)
    if trend:
        lines += ["Lineage (oldest first):", *trend]
    if choice and choice["note"]:
        lines.append(f"The engineer's note: {choice['note']}")
    given = {"kernel_id": kernel_id, "attached": [k for k in attached if k in profiles],
             "note": choice["note"] if choice else None}
    if not lines:
        return Evidence(f"No hardware evidence for kernel {kernel_id} yet.", given)
    return Evidence("\n".join(lines), given)


def runtime_lines(data: dict) -> list[str]:
    n = data["launches"]
    lines = [f"Per call: {n} kernel launch{'es' if n != 1 else ''}; kernels busy "
             f"{100 * (data.get('gpu_busy_fraction') or 0):.0f}% of the {data['time_ms']:.4f} ms."]
    rows = launch_rows(data)[:TOP_KERNELS]
    if rows:
        lines += ["| " + " | ".join(LAUNCH_COLUMNS) + " |",
                  "|" + "---|" * len(LAUNCH_COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


LAUNCH_COLUMNS = ("kernel", "us", "share", "launches", "grid", "block", "regs", "smem B",
                  "stack B", "occupancy (limit)")


def launch_rows(data: dict, width: int = 48) -> list[list[str]]:
    """One row of LAUNCH_COLUMNS per kernel of a call, longest first (prompts and the app)."""
    rows = []
    for k in sorted(data.get("kernels") or [], key=lambda k: -k["us"]):
        occ = (f"{100 * k['occupancy']:.0f}% ({k['occupancy_limiter']})"
               if k.get("occupancy") is not None else "-")
        rows.append([short(k["name"], width), f"{k['us']:.1f}", f"{100 * (k['share'] or 0):.0f}%",
                     str(k["launches"]), dims(k.get("grid")), dims(k.get("block")),
                     _val(k.get("registers")), _val(k.get("shared_bytes")),
                     _val(k.get("stack_bytes")), occ])
    return rows


def ncu_lines(data: dict) -> list[str]:
    main = data.get("main") or {}
    if not main:
        return []
    stalls = ", ".join(f"{s['reason']} {s['cycles']:.1f}" for s in main.get("stalls", [])[:TOP_STALLS])
    return [f"Nsight Compute ({short(main['name'])}): DRAM {_pct(main.get('dram_pct'))}, "
            f"L2 {_pct(main.get('l2_pct'))}, L1 {_pct(main.get('l1_pct'))}, "
            f"SM {_pct(main.get('sm_pct'))}, tensor pipe {_pct(main.get('tensor_pct'))} of peak; "
            f"achieved occupancy {_pct(main.get('achieved_occupancy_pct'))} "
            f"(theoretical {_pct(main.get('theoretical_occupancy_pct'))}); "
            f"{_val(main.get('inst_per_element'), '.2f')} warp instructions and "
            f"{_val(main.get('dram_bytes_per_element'), '.2f')} DRAM bytes per output element; "
            f"top stalls (cycles per issue): {stalls or '-'}."]


def lineage_lines(store: Store, kernel_id: int) -> list[str]:
    """One line per ancestor with a timed run: time and bottleneck class."""
    lines = []
    for kid in reversed(store.lineage(kernel_id, LINEAGE + 1)[1:]):
        p = store.kernel_profiles(kid)
        if "runtime" not in p:
            continue
        cls = p["bottleneck"]["data"]["class"] if "bottleneck" in p else "?"
        lines.append(f"- kernel {kid}: {p['runtime']['data']['time_ms']:.4f} ms, {cls}")
    return lines


def bottleneck_of(store: Store, kernel_id: int | None) -> str:
    """The class alone ("memory-bound"): the figures are in the evidence section."""
    if kernel_id is None:
        return "not diagnosed yet (no custom kernel)"
    found = store.kernel_profiles(kernel_id).get("bottleneck")
    return f"{found['data']['class']}, by the figures above" if found else "not diagnosed yet"


def short(name: str, width: int = 48) -> str:
    name = name.split("(")[0].removeprefix("void ")
    return name if len(name) <= width else name[:width - 1] + "…"


def dims(d) -> str:
    if isinstance(d, (list, tuple)):
        return "x".join(str(x) for x in d if x != 1) or "1"
    return _val(d)


def _val(v, fmt: str = "") -> str:
    return "-" if v is None else format(v, fmt)


def _pct(v) -> str:
    return "-" if v is None else f"{v:.0f}%"


def _kib(v) -> str:
    return "-" if not v else f"{v / 1024:.0f} KiB"


def _mib(v) -> str:
    return "-" if not v else f"{v / 2**20:.0f} MiB"
