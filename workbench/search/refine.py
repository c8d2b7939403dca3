"""Refinement: a correct kernel among a round's top-k goes back to the model with its hardware
evidence ("make this faster"); the child is verified like any kernel, and a faster child that
ranks in the top-k is refined again while the chain is shorter than `refines` (serial
refinement of a working kernel, as in Kevin). And before a seed is ideated, an Nsight Compute
profile of it when ncu can run here. A mixin of Engine, like pipelines.py."""
from __future__ import annotations

from workbench import events
from workbench.evidence import nsight, render
from workbench.search import context


class Refining:
    def _refine(self, kernel_ids: list[int]) -> list[int]:
        return [k for k in self._parallel(self._refine_one, [(k,) for k in kernel_ids]) if k]

    def _refine_one(self, kernel_id: int) -> int | None:
        """Ask for a faster version of a kernel, store and verify it; the child's id or None."""
        child = self._refine_call(kernel_id)
        if child:
            self._evaluate([child])
        return child

    def _refine_call(self, kernel_id: int) -> int | None:
        """Ask for a faster version of a kernel and store it; not verified yet (the flow
        verifies every unevaluated kernel as it appears)."""
        kernel = self.store.get("kernels", kernel_id)
        idea = self.store.get("ideas", kernel["idea_id"]) if kernel["idea_id"] else None
        evidence = self._evidence(kernel_id)
        prompt = self.prompts.render(
            "refine", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(),
            seed=context.seed_text(self.store, self.problem_id, kernel_id),
            gpu=render.gpu_text(self.store, self.problem_id), evidence=evidence.text,
            bottleneck=render.bottleneck_of(self.store, kernel_id),
            conventions=self._conventions())
        completion = self.calls.ask("refine", prompt, idea["round_id"] if idea else None,
                                    kernel_id=kernel_id)
        depth = kernel["attempt"] + 1 if kernel["origin"] == "refine" else 1
        return self._store_kernel("refine", prompt, completion, idea, parent_id=kernel_id,
                                  attempt=depth, repaired_id=kernel_id, evidence=evidence.given)

    def _profile_seed(self, seed_id: int | None) -> None:
        """Profile a seed with ncu once (its figures then reach the ideation prompt); the
        session goes on without them when ncu cannot run or fails."""
        gpus = list(getattr(self.executor, "gpus", None) or [])
        cache_dir = getattr(self.executor, "cache_dir", None)
        if (seed_id is None or not self.settings.profile_seeds or self.settings.eval.no_gpu
                or cache_dir is None or nsight.unavailable(gpus) is not None
                or "ncu" in self.store.kernel_profiles(seed_id)):
            return
        self._emit(events.Progress(f"kernel {seed_id}: Nsight Compute profile"))
        result = nsight.profile_kernel(self.store, seed_id, cache_dir, gpus[0],
                                       self.settings.profile_timeout_s)
        if "error" in result:
            self._emit(events.Progress(f"kernel {seed_id}: no ncu profile: {result['error']}"))
