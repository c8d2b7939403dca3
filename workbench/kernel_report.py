"""The report that travels with an exported kernel: what it solves, where it came from, how it did.

Everything comes from the store: the problem, the lineage (ideas and kernels round by round back
to the reference), the latest evaluation's full verdict, and the session's environment.
"""
from __future__ import annotations

import json
from typing import Any

from workbench.gpu.verdict import fmt_ms, fmt_x
from workbench.store import Store
from workbench.verdict_seal import UNTRUSTED


def counts_as_correct(status: str | None, cleared: int | None, trusted: bool = True) -> bool:
    """Correct for reporting and export: latest verdict `correct`, or `flagged` and cleared,
    and sealed by the verifier (an untrusted verdict never counts)."""
    return bool(trusted) and (status == "correct" or (status == "flagged" and bool(cleared)))


def _json(text: str | None, default: Any) -> Any:
    return json.loads(text) if text else default


def lineage(store: Store, kernel_id: int) -> list[dict]:
    """From the reference to this kernel: each step's round, idea and latest verdict."""
    steps, seen = [], set()
    current: int | None = kernel_id
    while current is not None and current not in seen:
        seen.add(current)
        kernel = store.find("kernels", current)
        if kernel is None:
            break
        idea = store.find("ideas", kernel["idea_id"]) if kernel["idea_id"] else None
        evaluation = store.latest_evaluation(current)
        steps.append({
            "kernel_id": current, "round": store.kernel_round(current), "origin": kernel["origin"],
            "idea": {k: idea[k] for k in ("id", "text", "author", "status", "kind")}
            if idea else None,
            "status": evaluation["status"] if evaluation else None,
            "speedup_eager": evaluation["speedup_eager"] if evaluation else None})
        # A kernel without a recorded parent descends from its idea's seed, if any.
        current = kernel["parent_id"] or (idea["seed_kernel_id"] if idea else None)
    steps.append({"reference": True})
    return list(reversed(steps))


def kernel_report(store: Store, kernel_id: int) -> dict:
    """Everything the export report says about one kernel, JSON-ready."""
    kernel = store.get("kernels", kernel_id)
    problem = store.get("problems", kernel["problem_id"])
    session = store.find("sessions", kernel["session_id"]) if kernel["session_id"] else None
    evaluation = store.latest_evaluation(kernel_id)
    build = store.latest_build(kernel_id)
    verdict = _json(evaluation["verdict"], {}) if evaluation else {}
    time_ms, floor_ms = verdict.get("time_ms"), verdict.get("floor_ms")
    fraction = verdict.get("roofline_fraction")
    if fraction is None and time_ms and floor_ms:
        fraction = floor_ms / time_ms
    return {
        "kernel": {k: kernel[k] for k in ("id", "hash", "origin", "session_id", "parent_id",
                                           "idea_id", "pinned", "cleared", "created_at")},
        "problem": {k: problem[k] for k in ("name", "path", "hash", "family", "dtype", "flops",
                                             "min_bytes", "atol", "rtol")},
        "environment": {
            "session_id": session["id"] if session else None,
            "provider": session["provider"] if session else None,
            "model": session["model"] if session else None,
            "gpu": (session and session["gpu"]) or verdict.get("gpu"),
            "driver": session["driver"] if session else None,
            "torch": session["torch_version"] if session else None,
            "cuda": session["cuda_version"] if session else None},
        "lineage": lineage(store, kernel_id),
        "build": {k: build[k] for k in ("ok", "seconds", "cache_hit", "cache_key")}
        if build else None,
        "evaluation": None if evaluation is None else {
            "id": evaluation["id"], "created_at": evaluation["created_at"],
            "status": evaluation["status"], "verified": verdict.get("verified"),
            "trusted": evaluation["trusted"], "reused_from": evaluation.get("reused_from"),
            "correct_for_reporting": counts_as_correct(evaluation["status"], kernel["cleared"],
                                                       evaluation["trusted"]),
            "gpu": evaluation["gpu"], "trials": evaluation["trials"],
            "atol": evaluation["atol"], "rtol": evaluation["rtol"],
            "max_abs_err": evaluation["max_abs_err"], "max_rel_err": evaluation["max_rel_err"],
            "trial_errors": _json(evaluation["trial_errors"], []),
            "time_ms": time_ms, "ci95_ms": verdict.get("ci95_ms"),
            "ref_eager_ms": verdict.get("ref_eager_ms"),
            "ref_eager_ci95_ms": verdict.get("ref_eager_ci95_ms"),
            "ref_compile_ms": verdict.get("ref_compile_ms"),
            "ref_compile_ci95_ms": verdict.get("ref_compile_ci95_ms"),
            "speedup_eager": verdict.get("speedup_eager"),
            "speedup_eager_ci95": verdict.get("speedup_eager_ci95"),
            "speedup_compile": verdict.get("speedup_compile"),
            "speedup_compile_ci95": verdict.get("speedup_compile_ci95"),
            "compile_reference_error": verdict.get("compile_reference_error"),
            "floor_ms": floor_ms, "roofline_fraction": fraction,
            "roofline_percent": None if fraction is None else 100 * fraction,
            "hard_floor_ms": verdict.get("hard_floor_ms"), "floor_basis": verdict.get("floor_basis"),
            "baseline": verdict.get("baseline"),
            "reference_precision": verdict.get("reference_precision"),
            "flags": _json(evaluation["flags"], []), "notes": verdict.get("notes") or [],
            "error": evaluation["error"]},
    }


def _g(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def render_markdown(report: dict) -> str:
    p, k, env, ev = report["problem"], report["kernel"], report["environment"], report["evaluation"]
    out = [f"# Kernel {k['id']} for `{p['name']}`", "",
           "## Problem", "",
           f"- name: `{p['name']}` ({p['family']}, {p['dtype']}), source `{p['path']}`",
           f"- FLOPs: {p['flops'] if p['flops'] is not None else '-'}; minimum bytes moved: "
           f"{p['min_bytes']}",
           f"- tolerance: atol={_g(p['atol'])} rtol={_g(p['rtol'])}", "",
           "## Lineage", "", "| step | round | kernel | idea | verdict | vs eager |",
           "|---|---|---|---|---|---|"]
    for i, step in enumerate(report["lineage"]):
        if step.get("reference"):
            out.append(f"| {i} | - | reference (`Model`) | - | - | 1.000x |")
            continue
        idea = step["idea"]
        text = (f"{idea['text']} ({idea['author']}, {idea['status']})" if idea
                else f"({step['origin']}, no idea recorded)")
        out.append(f"| {i} | {step['round'] if step['round'] is not None else '-'} | "
                   f"{step['kernel_id']} | {text.replace('|', '/').replace(chr(10), ' ')} | "
                   f"{step['status'] or 'not evaluated'} | {fmt_x(step['speedup_eager'])} |")
    out += ["", "## Evaluation", ""]
    if ev is None:
        out.append("Never evaluated: no correctness or timing figures exist for this kernel.")
    else:
        verified = "" if ev["verified"] else " (not verified on a GPU)"
        if not ev["trusted"]:
            verified += f" — UNTRUSTED: {UNTRUSTED}"
        if ev["reused_from"]:
            verified += (f"; a copy of evaluation {ev['reused_from']}'s verdict (the same source, "
                         "not measured again)")
        out += [f"- status: **{ev['status']}**{verified}; evaluation {ev['id']} at "
                f"{ev['created_at']}",
                f"- correctness: {ev['trials'] or 0} trials, atol={_g(ev['atol'])} "
                f"rtol={_g(ev['rtol'])}, max abs err {_g(ev['max_abs_err'])}, "
                f"max rel err {_g(ev['max_rel_err'])}",
                f"- candidate: {fmt_ms(ev['time_ms'], ev['ci95_ms'])}",
                f"- eager: {fmt_ms(ev['ref_eager_ms'], ev['ref_eager_ci95_ms'])}",
                f"- torch.compile: {fmt_ms(ev['ref_compile_ms'], ev['ref_compile_ci95_ms'])}" +
                (f" (not timed: the reference's compile failed: {ev['compile_reference_error']})"
                 if ev["compile_reference_error"] else ""),
                f"- speedup vs eager: {fmt_x(ev['speedup_eager'], ev['speedup_eager_ci95'])}",
                f"- speedup vs torch.compile: "
                f"{fmt_x(ev['speedup_compile'], ev['speedup_compile_ci95'])}",
                f"- roofline floor: {fmt_ms(ev['floor_ms'])}; the kernel runs at "
                + ("-" if ev["roofline_percent"] is None else f"{ev['roofline_percent']:.1f}%")
                + " of the floor's speed"]
        if ev["baseline"]:
            out.append(f"- baselines: eager and torch.compile timed under "
                       f"{ev['baseline']['description']}; correctness against "
                       f"{ev['baseline']['correctness']}" +
                       (f" ({ev['reference_precision']} reference)" if ev["reference_precision"] else ""))
        if ev["trial_errors"]:
            out += ["", "| trial | inputs | ok | max abs err | max rel err | reason |",
                    "|---|---|---|---|---|---|"]
            for t in ev["trial_errors"]:
                out.append(f"| {t.get('trial')} | {t.get('distribution') or '-'} | "
                           f"{'yes' if t.get('ok') else 'no'} | {_g(t.get('max_abs_err'))} | "
                           f"{_g(t.get('max_rel_err'))} | {t.get('reason') or ''} |")
        out += ["", "Flags: " + ("none" if not ev["flags"] else "; ".join(
            f"[{f.get('kind')}] {f.get('reason')}" for f in ev["flags"]))
            + (" (cleared by a person)" if k["cleared"] and ev["flags"] else "")]
        if ev["notes"]:
            out += ["", "Notes: " + "; ".join(f"[{n.get('kind')}] {n.get('reason')}"
                                             for n in ev["notes"])]
        if ev["error"]:
            out += ["", "Error:", "", "```", ev["error"], "```"]
    out += ["", "## Environment", ""]
    out += [f"- {label}: {env[key] or 'unknown'}" for label, key in (
        ("GPU", "gpu"), ("driver", "driver"), ("torch", "torch"), ("CUDA", "cuda"),
        ("session", "session_id"), ("provider", "provider"), ("model", "model"))]
    return "\n".join(out) + "\n"
