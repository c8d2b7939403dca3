"""The evidence of one kernel as tables with bars for % of peak: for `kernel-workbench profile`
and the app's profile pane (which renders the same rows)."""
from __future__ import annotations

from workbench.evidence import render
from workbench.gpu import ncu
from workbench.store import Store

BAR = 20


def bar(percent: float | None, width: int = BAR) -> str:
    """'██████████░░░░░░░░░░  52%' (clipped to 0..100)."""
    if percent is None:
        return " " * width + "    -"
    filled = round(max(0.0, min(100.0, percent)) / 100 * width)
    return "█" * filled + "░" * (width - filled) + f" {percent:4.0f}%"


def peak_rows(profiles: dict) -> list[tuple[str, float | None]]:
    """(label, % of peak) rows: the verifier's fractions of the measured ceilings, then ncu's."""
    rows: list[tuple[str, float | None]] = []
    rt = profiles.get("runtime", {}).get("data")
    if rt:
        rows.append(("DRAM bandwidth (min bytes / time, of measured)",
                     _pct(rt.get("bandwidth_fraction"))))
        rows.append((f"{rt['flops_dtype']} FLOP/s (of measured)", _pct(rt.get("flops_fraction"))))
    main = (profiles.get("ncu", {}).get("data") or {}).get("main")
    if main:
        rows += [(f"ncu {label}", main.get(key)) for key, label in ncu.LABELS.items()]
    return rows


def text(store: Store, kernel_id: int) -> str:
    p = store.kernel_profiles(kernel_id)
    lines = [f"kernel {kernel_id}"]
    for kind in ("bottleneck", "change", "resources"):
        if kind in p:
            lines.append(f"{kind}: {p[kind]['summary']}")
    if "runtime" in p:
        lines += ["", *render.runtime_lines(p["runtime"]["data"])]
    rows = peak_rows(p)
    if rows:
        width = max(len(label) for label, _ in rows)
        lines += ["", "% of peak"] + [f"  {label:<{width}}  {bar(v)}" for label, v in rows]
    data = p.get("ncu", {}).get("data")
    if data:
        lines += ["", *ncu_table(data)]
    if len(lines) == 1:
        lines.append("no evidence stored yet (evaluate it on a GPU first)")
    return "\n".join(lines)


def ncu_table(data: dict) -> list[str]:
    lines = [f"Nsight Compute ({len(data['kernels'])} kernel(s), {data.get('seconds', 0):.1f} s):",
             "| kernel | us | DRAM % | L2 % | L1 % | SM % | tensor % | occ. achieved/theor. % "
             "| regs | warp inst/elem | DRAM B/elem |"]
    for k in data["kernels"]:
        lines.append(
            f"| {render.short(k['name'], 40)} | {_f(k['time_ns'], 1e-3, '.1f')} "
            f"| {_f(k['dram_pct'])} | {_f(k['l2_pct'])} | {_f(k['l1_pct'])} | {_f(k['sm_pct'])} "
            f"| {_f(k['tensor_pct'])} | {_f(k['achieved_occupancy_pct'])}/"
            f"{_f(k['theoretical_occupancy_pct'])} | {_f(k['registers'])} "
            f"| {_f(k.get('inst_per_element'), 1, '.2f')} "
            f"| {_f(k.get('dram_bytes_per_element'), 1, '.2f')} |")
    main = data["main"]
    if main.get("stalls"):
        lines.append("top warp stalls of the main kernel (cycles per issued instruction): " +
                     ", ".join(f"{s['reason']} {s['cycles']:.2f}" for s in main["stalls"]))
    v = data.get("verifier")
    if v and v.get("ncu_bandwidth_fraction") is not None:
        lines.append(
            f"DRAM traffic: ncu {100 * v['ncu_bandwidth_fraction']:.0f}% of the verifier's "
            f"measured {v['ceiling_bytes_per_s'] / 1e12:.2f} TB/s ceiling; the verifier's "
            f"minimum-bytes figure {100 * (v['bandwidth_fraction'] or 0):.0f}%; the kernel moved "
            f"{v['dram_bytes_over_minimum']:.2f}x the minimum bytes")
    return lines


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def _f(v, scale: float = 1.0, fmt: str = ".0f") -> str:
    return "-" if v is None else format(v * scale, fmt)
