"""Profile one stored kernel with Nsight Compute and store the result as its `ncu` profile.

The profiled program (workbench.gpu.profile_worker) runs with the verifier worker's environment
and private job directory (no API keys, private HOME/TMP/build dir) and takes the same GPU lock;
ncu itself needs the performance counters and its own IPC, so the namespace/Landlock layers of
the worker sandbox are not applied to it (the kernel has already passed the verifier). Where
the user requires the full sandbox, nothing is profiled: less isolation is never silent. A time
limit kills the whole process group.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from workbench import cuda_env
from workbench.evidence import diagnose
from workbench.gpu import confine, ncu, sandbox
from workbench.store import Store

DEFAULT_TIMEOUT_S = 300.0
OUTSIDE = ("ncu runs the kernel outside the worker's namespaces, Landlock and seccomp (it needs "
           "the performance counters and its own IPC), with only the worker's environment and "
           "private directories")


def unavailable(gpus: list[int]) -> str | None:
    """Why ncu cannot profile on this machine, in one line, or None."""
    if not gpus:
        return "no GPU on this machine: Nsight Compute profiles need one"
    if sandbox.required():
        return (f"not profiled: {OUTSIDE}, and this machine requires the full sandbox "
                "([sandbox] require in config.toml, or --require-sandbox)")
    if ncu.find_ncu() is None:
        return "ncu (Nsight Compute) not found: install it or put CUDA's bin/ on PATH"
    if ncu.counters_restricted():
        return ("ncu cannot read the GPU performance counters: the driver restricts them to "
                "administrators (RmProfilingAdminOnly=1); run as root or set "
                "NVreg_RestrictProfilingToAdminUsers=0")
    return None


def profile_kernel(store: Store, kernel_id: int, cache_dir: Path, gpu: int,
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """{"data": ncu summary} stored as the kernel's `ncu` profile, or {"error": one line}."""
    reason = unavailable([gpu])
    if reason:
        return {"error": reason}
    kernel = store.get("kernels", kernel_id)
    problem = store.kernel_problem(kernel_id)
    t0 = time.monotonic()
    with sandbox.worker_launch(cache_dir, cuda_env.build_env(), gpu) as launch:
        env = {k: v for k, v in launch.env.items() if k != confine.POLICY_ENV}
        tmp = launch.job_dir / "tmp"
        job, result_path, log = tmp / "profile.json", tmp / "result.json", tmp / "ncu.csv"
        job.write_text(json.dumps({
            "problem_source": problem["source"], "candidate_source": kernel["source"],
            "cache_dir": str(cache_dir), "gpu_lock": str(cache_dir / f"gpu{gpu}.lock"),
            "seed": 1234, "result_path": str(result_path)}))
        cmd = ncu.command(ncu.find_ncu(), log, [sys.executable, "-m",
                                                "workbench.gpu.profile_worker", str(job)])
        proc = subprocess.Popen(cmd, env=env, cwd=launch.cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            printed, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"error": f"ncu took longer than {timeout_s:.0f} s; it was killed "
                             "(raise --timeout for large kernels: ncu replays each kernel)"}
        text = log.read_text() if log.exists() else ""
        result = json.loads(result_path.read_text()) if result_path.exists() else None
    seconds = time.monotonic() - t0
    return _store(store, kernel_id, text, printed or "", result, proc.returncode, seconds)


def _store(store: Store, kernel_id: int, text: str, printed: str, result: dict | None,
           returncode: int, seconds: float) -> dict:
    if result is not None and not result.get("ok"):
        return {"error": f"the profiled run failed: {result.get('error')}"}
    kernels = ncu.parse_csv(text)
    if not kernels:
        why = ncu.failure(text + "\n" + printed)
        if why is None and result is None:
            why = f"the profiled program exited with code {returncode} before its result"
        return {"error": f"ncu: {why or 'no kernel rows in its output'}"}
    data = ncu.summary(kernels, (result or {}).get("output_elements"))
    data["seconds"] = seconds
    _compare_with_verifier(store, kernel_id, data)
    main = data["main"]
    store.add_profile(kernel_id, "ncu", data, summary_line(data))
    runtime = store.kernel_profiles(kernel_id).get("runtime")
    if runtime:   # the bottleneck, now from ncu's throughputs
        verdict = diagnose.classify(runtime["data"], main)
        store.add_profile(kernel_id, "bottleneck", verdict, verdict["line"])
    return {"data": data}


def _compare_with_verifier(store: Store, kernel_id: int, data: dict) -> None:
    """ncu's DRAM bytes per second against the verifier's measured ceiling and its
    minimum-bytes bandwidth fraction: the two agree when the kernel moves only what it must."""
    runtime = store.kernel_profiles(kernel_id).get("runtime")
    main = data["main"]
    if not runtime or not main or not main.get("dram_bytes_per_s"):
        return
    rt = runtime["data"]
    total_bytes = sum(k["dram_bytes"] or 0 for k in data["kernels"])
    total_s = sum(k["time_ns"] or 0 for k in data["kernels"]) * 1e-9
    ceiling = rt.get("ceiling_bytes_per_s")
    data["verifier"] = {
        "bandwidth_fraction": rt.get("bandwidth_fraction"), "ceiling_bytes_per_s": ceiling,
        "ncu_bandwidth_fraction": (total_bytes / total_s / ceiling) if ceiling and total_s else None,
        "dram_bytes_over_minimum": (total_bytes / (rt["achieved_bytes_per_s"] * rt["time_ms"] * 1e-3)
                                    if rt.get("achieved_bytes_per_s") else None)}


def summary_line(data: dict) -> str:
    m = data["main"]
    parts = [f"{ncu.LABELS[k]} {m[k]:.0f}%" for k in ("dram_pct", "l2_pct", "l1_pct", "sm_pct",
                                                      "tensor_pct", "achieved_occupancy_pct")
             if m.get(k) is not None]
    stalls = ", ".join(s["reason"] for s in m.get("stalls", [])[:3])
    return f"{len(data['kernels'])} kernel(s); main: " + ", ".join(parts) + \
        (f"; top stalls: {stalls}" if stalls else "")


PROBE = "import torch; x = torch.ones(1024, device='cuda'); torch.cuda.synchronize(); print(float((x * 2).sum()))"


def doctor_check(gpus: list[int], timeout_s: float = 180.0) -> tuple[str, str, str]:
    """(ok | warn, detail, fix) for `doctor`: ncu found, and on a GPU machine a real one-kernel
    profile, so a missing counter permission (ERR_NVGPUCTRPERM) shows here, not mid-session."""
    tool = ncu.find_ncu()
    if tool is None:
        return ("warn", "ncu not found: no Nsight Compute profiles (builds and timings still "
                "give registers, occupancy and achieved bandwidth)",
                "install Nsight Compute (it ships with the CUDA toolkit) and put it on PATH")
    try:
        version = subprocess.run([tool, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.strip().splitlines()[-1]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        version = "version unknown"
    if not gpus:
        return "warn", f"{tool} ({version}); no GPU to profile on", "run on a GPU machine"
    if ncu.counters_restricted():
        return ("warn", f"{tool} ({version}) lacks access to the GPU performance counters "
                "(RmProfilingAdminOnly=1)", "run as root or set NVreg_RestrictProfilingToAdminUsers=0")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpus[0])}
    try:
        out = subprocess.run([tool, "--metrics", "gpu__time_duration.sum", sys.executable,
                              "-c", PROBE], capture_output=True, text=True, timeout=timeout_s,
                             env=env)
    except subprocess.TimeoutExpired:
        return "warn", f"{tool} ({version}): a one-kernel profile took over {timeout_s:.0f} s", \
            "check that the GPU is free"
    text = out.stdout + out.stderr
    if "ERR_NVGPUCTRPERM" in text:
        return ("warn", f"{tool} ({version}) lacks access to the GPU performance counters "
                "(ERR_NVGPUCTRPERM)", "run as root or set NVreg_RestrictProfilingToAdminUsers=0")
    if "gpu__time_duration" not in text:
        why = ncu.failure(text) or f"exit code {out.returncode}"
        return "warn", f"{tool} ({version}) could not profile a test kernel: {why}", \
            "run `ncu --metrics gpu__time_duration.sum python -c ...` by hand to see why"
    if sandbox.required():
        return "warn", f"{tool} ({version}) works, but the full sandbox is required and {OUTSIDE}:" \
            " no kernel is profiled", "leave [sandbox] require off to get ncu profiles"
    return "ok", f"{tool} ({version}); profiled a test kernel ({OUTSIDE})", ""
