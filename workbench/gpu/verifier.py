"""Glue between callers and the executor: build requests, store what comes back."""
from __future__ import annotations

from workbench.evidence.record import store_verdict
from workbench.gpu.executor import EvalRequest, EvalSettings
from workbench.problems import Problem
from workbench.store import Store


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


def record(store: Store, kernel_id: int, verdict: dict) -> int:
    """Store the build and the evaluation of one verdict together; returns the evaluation id."""
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
