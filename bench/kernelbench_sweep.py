"""KernelBench sweep: load every level 1-3 problem file and judge the reference itself as the
candidate, with the verifier's own correctness check (workbench.gpu.correctness, as the worker
runs it: strict fp32, float64 reference, structure-respecting input variants, redraws). Each
file should load, and the reference's copy should pass with no flag but `pytorch_does_the_work`
(which the profile gives any candidate without kernels of its own). Prints a Markdown summary and
a table of the exceptions, with reasons.

In-process, one problem after another, so 250 problems fit in minutes: no worker start-up, no
timing phase (the timing code is not what can reject a reference). Trials default to 3 (one
each of the fresh, scaled and shifted draws) instead of the verifier's 6.

usage: python bench/kernelbench_sweep.py [KB_DIR] [--trials N] [--budget-s S] [--load-only]
       KB_DIR holds level1/ level2/ level3/ of ScalingIntelligence/KernelBench (default ./.kb)
"""
from __future__ import annotations

import argparse
import gc
import json
import re
import secrets
import sys
import time
from pathlib import Path

from workbench.problems import ProblemError, exec_source, load_problem


def problem_files(root: Path) -> list[Path]:
    def order(p: Path):
        m = re.match(r"(\d+)_", p.name)
        return (p.parent.name, int(m.group(1)) if m else 0, p.name)

    return sorted((p for level in ("level1", "level2", "level3")
                   for p in (root / level).glob("*.py")), key=order)


def judge_reference(path: Path, problem, trials: int, device: str = "cuda") -> dict:
    """Correctness of the reference's own copy, and (on a GPU) the kernel-time split."""
    import torch

    from workbench.gpu import baseline, correctness, judge, launch_trace
    from workbench.gpu import inputs as inp
    from workbench.gpu import runtime_guards as rg

    inp.DEVICE = device
    mod = exec_source(problem.source, str(path))
    seed = secrets.randbits(31)
    models = []
    for _ in range(2):
        torch.manual_seed(seed)
        with torch.device(device):
            models.append(mod.Model(*mod.get_init_inputs()).to(device).eval())
    ref, cand = models
    cand.load_state_dict(ref.state_dict())
    seeds = [secrets.randbits(31) for _ in range(trials + 2)]
    with baseline.strict():
        out = correctness.check(mod, ref, cand, seeds, trials, problem.atol, problem.rtol)
    row = {"trials": out.trials, "reference_precision": out.reference_precision,
           "reference_error_rel": out.reference_error_rel, "notes": [n["kind"] for n in out.notes],
           "redraws": sum(1 for e in out.trial_errors if e["ok"] is None),
           "flags": [f["kind"] for f in out.flags]}
    if out.unusable:
        return {**row, "status": "unverified", "reason": out.unusable}
    if out.failure:
        return {**row, "status": "incorrect", "reason": out.failure}
    share = None
    if device == "cuda":
        with torch.no_grad():
            launches = launch_trace.profile_launches(cand, inp.generate(mod, seeds[-1], "default"))
        split = rg.attribute([(k["name"], k["us"]) for k in launches], [])
        share = judge.pytorch_share(*split, has_own_kernels=False)
    if judge.pytorch_does_the_work(share):
        row["flags"].append("pytorch_does_the_work")
    extra = [f for f in row["flags"] if f != "pytorch_does_the_work"]
    return {**row, "status": "flagged" if row["flags"] else "correct", "pytorch_share": share,
            "reason": ("flags: " + ", ".join(extra)) if extra else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kb_dir", nargs="?", default=".kb")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=450.0)
    ap.add_argument("--load-only", action="store_true", help="load the files only (no GPU)")
    ap.add_argument("--json", type=Path, help="also write every row here")
    args = ap.parse_args()
    files = problem_files(Path(args.kb_dir))
    if not files:
        print(f"no level1-3 problem files under {args.kb_dir}", file=sys.stderr)
        return 2
    if not args.load_only:
        import torch
        if not torch.cuda.is_available():
            print("no CUDA device: use --load-only", file=sys.stderr)
            return 2
    rows, t0 = [], time.perf_counter()
    for path in files:
        name = f"{path.parent.name}/{path.stem}"
        if time.perf_counter() - t0 > args.budget_s:
            rows.append({"problem": name, "stage": "-", "status": "not reached",
                         "reason": f"time budget of {args.budget_s:.0f} s spent"})
            continue
        start = time.perf_counter()
        try:
            problem = load_problem(path, smoke=False)
        except ProblemError as e:
            rows.append({"problem": name, "stage": "load", "status": "load error",
                         "reason": str(e).split(": ", 1)[-1], "seconds": time.perf_counter() - start})
            continue
        row = {"problem": name, "stage": "load", "status": "loaded", "reason": None}
        if not args.load_only:
            row["stage"] = "correctness"
            try:
                row.update(judge_reference(path, problem, args.trials))
            except Exception as e:  # noqa: BLE001 - one problem's failure is a row, not the end
                row.update(status="error", reason=f"{type(e).__name__}: {' '.join(str(e).split())}"[:300])
            finally:
                gc.collect()
                torch.cuda.empty_cache()
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        print(f"{time.perf_counter() - t0:7.1f} s  {name}: {row['status']}"
              + (f" ({row['reason']})" if row.get("reason") else ""), file=sys.stderr, flush=True)
    print(report(rows, args, time.perf_counter() - t0))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def is_exception(row: dict, load_only: bool) -> bool:
    if load_only:
        return row["status"] != "loaded"
    return row["status"] not in ("correct", "flagged") or bool(row.get("reason"))


def report(rows: list[dict], args, seconds: float) -> str:
    loaded = sum(1 for r in rows if r["status"] not in ("load error", "not reached"))
    exceptions = [r for r in rows if is_exception(r, args.load_only)]
    what = "loaded" if args.load_only else f"judged ({args.trials} trials each, reference as candidate)"
    lines = [f"KernelBench levels 1-3: {len(rows)} files, {loaded} loaded, "
             f"{len(rows) - len(exceptions)} {what} without exception, in {seconds:.0f} s.", ""]
    if not args.load_only:
        redrawn = [r["problem"] for r in rows if r.get("redraws")]
        fp32_only = [r["problem"] for r in rows if str(r.get("reference_precision", "float64"))
                     != "float64"]
        noted = [f"{r['problem']} ({', '.join(r['notes'])})" for r in rows if r.get("notes")]
        lines += [f"- redrawn after a non-finite reference: {', '.join(redrawn) or 'none'}",
                  f"- judged without a float64 reference: {', '.join(fp32_only) or 'none'}",
                  f"- notes: {'; '.join(noted) or 'none'}", ""]
    if exceptions:
        lines += ["| problem | stage | status | reason |", "|---|---|---|---|"]
        lines += [f"| {r['problem']} | {r['stage']} | {r['status']} | "
                  f"{(r.get('reason') or '').replace('|', '/')} |" for r in exceptions]
    else:
        lines.append("No exceptions.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
