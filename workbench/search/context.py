"""The pieces of prompts the search fills in from the store: a seed, the ideas tried so far."""
from __future__ import annotations

from workbench.llm.parse import KINDS
from workbench.search import queries
from workbench.store import Store


def seed_text(store: Store, problem_id: int, seed_id: int | None) -> str:
    """A seed kernel's source and measured figures (or the reference's eager time)."""
    if seed_id is None:
        ref = queries.reference_eager_ms(store, problem_id)
        timing = f" It runs in {ref:.4f} ms in PyTorch eager." if ref is not None else ""
        return f"The PyTorch reference above; no custom kernel yet.{timing}"
    kernel = store.get("kernels", seed_id)
    ev = store.latest_evaluation(seed_id)
    header = f"Kernel {seed_id}:"
    if kernel["problem_id"] != problem_id:   # seeded from the bank: another problem's kernel
        other = store.get("problems", kernel["problem_id"])
        header = (f"Kernel {seed_id}, from the kernel bank: it was written for another problem, "
                  f"`{other['name']}` ({other['family']}, {other['dtype']}). Adapt what "
                  "carries over (tiling, memory access, launch shape) to the problem above; "
                  "its figures below are for that problem:")
    lines = [header, "", "```python", kernel["source"].rstrip(), "```", ""]
    if ev and ev["time_ms"] is not None:
        numbers = [f"{ev['time_ms']:.4f} ms"]
        if ev["speedup_eager"]:
            numbers.append(f"{ev['speedup_eager']:.2f}x vs PyTorch eager")
        if ev["speedup_compile"]:
            numbers.append(f"{ev['speedup_compile']:.2f}x vs torch.compile")
        if ev["floor_ms"]:
            numbers.append(f"{100 * ev['floor_ms'] / ev['time_ms']:.0f}% of the roofline "
                           f"floor's speed (floor {ev['floor_ms']:.4f} ms)")
        lines.append("Measured: " + ", ".join(numbers) + ".")
    elif ev:
        lines.append(f"Status: {ev['status']} (not timed).")
    return "\n".join(lines)


def history(store: Store, session_id: int, limit: int) -> tuple[str, str]:
    """Ideas tried in this session with their best outcome, and the kinds not tried yet."""
    rows = queries.idea_outcomes(store, session_id)
    tried = {r["kind"] for r in rows if r["kind"]}
    lines = []
    for r in rows[-limit:]:
        if r["status"] == "vetoed":
            outcome = "vetoed by the user"
        elif r["outcome"]:
            status, speedup = r["outcome"].split("|")
            outcome = status + (f", {float(speedup):.2f}x vs eager" if speedup else "")
        else:
            outcome = "not implemented yet"
        lines.append(f"- [{r['kind'] or 'unknown'}] {r['text']} → {outcome}")
    untried = [k for k in KINDS if k not in tried]
    return ("\n".join(lines) or "None yet."), (", ".join(untried) or
                                               "none left (all kinds tried: choose freely)")


# What makes implementation i of an idea differ from its siblings: one strategy each, so the
# M branches explore M ways to realise the idea rather than M samples of the same one.
VARIANTS = (
    "Write the most direct implementation of the idea.",
    "Choose a different work decomposition from the obvious one: another tile size or number "
    "of elements per thread, and another block size.",
    "Favour memory-level parallelism: vectorised loads and stores, several independent "
    "elements in flight per thread, fewer and fuller blocks.",
    "Favour occupancy and latency hiding: little state per thread, registers kept low, many "
    "resident warps.",
    "Restructure the launch: a grid-stride or persistent-block loop, or one warp (instead of "
    "one thread or one block) per unit of work.",
    "Move data through shared memory (or registers) in a different staging order from the "
    "direct version, e.g. transposed or double-buffered tiles.",
)


def variant(slot: int, of: int) -> str:
    """The instruction for implementation `slot` (0-based) of `of` of the same idea."""
    if of <= 1:
        return ""
    return (f"This is implementation {slot + 1} of {of} of this idea, each written "
            f"independently; make yours differ from the others this way: "
            f"{VARIANTS[slot % len(VARIANTS)]}")
