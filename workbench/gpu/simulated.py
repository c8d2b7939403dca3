"""A simulated GPU turn, for CPU tests of the pool's spares, GPU turns and watchdog.

The worker uses it instead of workbench.gpu.evaluate when KERNEL_WORKBENCH_SIMULATED_GPU is set
to a number of seconds: the reference and the candidate run on the CPU, a few trials check the
candidate, and "timing" calls it for that many seconds, beating the watchdog as the real turn
does. Everything around it (processes, spares, GPU locks, build slots, deadlines) is the real
code. Imports only torch and the standard library.
"""
from __future__ import annotations

import os
import statistics
import time
import types
from dataclasses import dataclass

import torch


# A problem small enough for a simulated turn (tests and bench/simulated_gpus.py), and its
# honest candidate.
TOY_PROBLEM = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(256)]
def get_init_inputs():
    return []
"""
TOY_CANDIDATE = TOY_PROBLEM.replace("class Model", "class ModelNew")


@dataclass
class Reference:
    problem: types.ModuleType
    model: torch.nn.Module
    eager_ms: float


def _inputs(problem, seed: int) -> list:
    torch.manual_seed(seed)
    return list(problem.get_inputs())


def prepare_reference(job: dict) -> Reference:
    problem = types.ModuleType("problem")
    exec(compile(job["problem_source"], "<problem>", "exec"), problem.__dict__)
    torch.manual_seed(job["seeds"][0])
    model = problem.Model(*problem.get_init_inputs())
    args = _inputs(problem, job["seeds"][-1])
    with torch.no_grad():
        model(*args)
        t = time.perf_counter()
        model(*args)
    return Reference(problem, model, (time.perf_counter() - t) * 1e3)


def evaluate(job: dict, candidate, recorder, reference: Reference, watched: dict,
             threads_before: set, chan) -> dict:
    seconds = float(os.environ["KERNEL_WORKBENCH_SIMULATED_GPU"])
    start = time.time()
    problem, seeds = reference.problem, job["seeds"]
    out = {"gpu": f"simulated {os.environ.get('CUDA_VISIBLE_DEVICES', '?')}", "flags": [],
           "ref_eager_ms": reference.eager_ms, "atol": job["atol"], "rtol": job["rtol"]}
    chan.beat()
    torch.manual_seed(seeds[0])
    cand = candidate.ModelNew(*problem.get_init_inputs())
    chan.phase("correctness")
    with torch.no_grad():
        for i in range(job["settings"]["trials"]):
            args = _inputs(problem, seeds[1 + i])
            chan.beat()
            got = cand(*args)
            if not torch.allclose(got, reference.model(*args), atol=job["atol"], rtol=job["rtol"]):
                return {**out, "status": "incorrect", "trials": i,
                        "error": f"trial {i}: outside tolerance"}
        chan.phase("timing")
        times = []
        while time.time() - start < seconds:
            chan.beat()
            t = time.perf_counter()
            cand(*args)
            times.append((time.perf_counter() - t) * 1e3)
    out.update(status="correct", trials=job["settings"]["trials"],
               time_ms=statistics.median(times) if times else None,
               turn=[start, time.time()])
    return out
