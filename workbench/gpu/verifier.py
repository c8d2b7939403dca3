"""Glue between callers and the executor: build requests, store what comes back."""
from __future__ import annotations

import functools
import json

from workbench import cuda_env
from workbench.evidence.record import store_verdict
from workbench.gpu.executor import EvalRequest, EvalSettings
from workbench.problems import Problem
from workbench.store import Store

REUSABLE = ("correct", "flagged", "incorrect", "compile_error", "unverified")


def request_for(problem: Problem, candidate_source: str, settings: EvalSettings,
                label: str = "") -> EvalRequest:
    """An EvalRequest with the tolerance resolved: the session's override, else the problem's."""
    return EvalRequest(
        problem_name=problem.name, problem_source=problem.source,
        candidate_source=candidate_source,
        atol=settings.atol if settings.atol is not None else problem.atol,
        rtol=settings.rtol if settings.rtol is not None else problem.rtol,
        flops=problem.flops, min_bytes=problem.min_bytes, dtype=problem.dtype,
        settings=settings, label=label)


@functools.cache
def _gpu_models() -> frozenset[str]:
    """This machine's GPU models, asked once: nvidia-smi for every reused kernel of a round
    adds up, and the GPUs do not change under a running process."""
    return frozenset(g.name for g in cuda_env.list_gpus())


def reused_verdict(store: Store, request: EvalRequest) -> dict | None:
    """The verdict already stored for the same source (comments and layout aside), problem and
    settings, with `reused_from` naming its evaluation; None when there is none to reuse.
    Verdicts that depend on the moment (timeout, crashed) are never reused; GPU verdicts only
    from a GPU of the kind this machine has; nor one timed without its torch.compile baseline
    because the reference's compile failed in the worker (the candidate is not why)."""
    row = store.reusable_evaluation(request.reuse_key(), REUSABLE)
    if row is None:
        return None
    verdict = json.loads(row["verdict"]) if isinstance(row["verdict"], str) else row["verdict"]
    if verdict.get("gpu") and verdict["gpu"] not in _gpu_models():
        return None
    if verdict.get("time_ms") is not None and verdict.get("compile_reference_error"):
        return None
    return {**verdict, "reused_from": row["id"]}


def record(store: Store, kernel_id: int, verdict: dict) -> int:
    """Store the build and the evaluation of one verdict together; returns the evaluation id.
    A reused verdict is stored as a copy of the evaluation it repeats."""
    if verdict.get("reused_from"):
        with store.transaction():
            copy_id = store.copy_evaluation(store.get("evaluations", verdict["reused_from"]),
                                            kernel_id, reused=True)
            store_verdict(store, kernel_id, copy_id, verdict)  # its evidence, for the prompts
            return copy_id
    with store.transaction():
        build_id = None
        if verdict.get("compile_s") is not None or verdict["status"] == "compile_error":
            build_id = store.add_build(
                kernel_id, ok=verdict["status"] != "compile_error",
                seconds=verdict.get("compile_s"), cache_hit=bool(verdict.get("cache_hit")),
                cache_key=verdict.get("cache_key"), log=verdict.get("build_log") or "",
                extensions=verdict.get("extensions"))
        evaluation_id = store.add_evaluation(kernel_id, verdict, build_id=build_id)
        store_verdict(store, kernel_id, evaluation_id, verdict)
        return evaluation_id
