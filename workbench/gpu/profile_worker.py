"""The program Nsight Compute profiles: build (from the cache) one candidate, warm it up, then
run one call between cudaProfilerStart and cudaProfilerStop, holding the GPU lock throughout.

Run as `python -m workbench.gpu.profile_worker JOB_FILE` under `ncu --profile-from-start off`.
The job (JSON) names the problem and candidate sources, the cache, the GPU lock, an input seed
and where to write the result ({ok, output_elements} or {ok: false, error}). Imports only torch
and the standard library.
"""
from __future__ import annotations

import fcntl
import json
import sys
import traceback
from pathlib import Path

WARMUP_CALLS = 3


def run(job: dict) -> dict:
    import torch

    from workbench.gpu import buildhook, candidate_file
    from workbench.gpu import inputs as inp

    buildhook.install(Path(job["cache_dir"]), buildhook.BuildRecorder())
    candidate = candidate_file.import_source(job["candidate_source"])
    problem = candidate_file.import_source(job["problem_source"], "problem")
    torch.manual_seed(job["seed"])
    with torch.device("cuda"):
        model = candidate.ModelNew(*problem.get_init_inputs())
    model = model.cuda().eval()
    args = inp.generate(problem, job["seed"], "default")
    with open(job["gpu_lock"], "a") as lock, torch.no_grad():
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
        for _ in range(WARMUP_CALLS):
            model(*args)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        out = model(*args)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    outputs = inp.tensors(out)
    return {"ok": True, "output_elements": sum(t.numel() for t in outputs)}


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    try:
        result = run(job)
    except BaseException as e:  # noqa: BLE001 - any failure becomes one line for the parent
        traceback.print_exc()
        result = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    Path(job["result_path"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
