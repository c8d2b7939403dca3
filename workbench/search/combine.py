"""The combine operator: one kernel merging the strengths of two kernels from different
lineages (Sakana's crossover, AlphaEvolve's inspirations). Once per round from round 1 when the
session's `combine` is on (policy.combine_pair picks the pair), or on demand (Engine.combine).
A mixin of Engine, like pipelines.py."""
from __future__ import annotations

from workbench import events
from workbench.search import context, policy, queries


class Combining:
    def _combine_due(self) -> list[int]:
        """The round's combine, when one is due (verified, and repaired within the budget)."""
        latest = queries.latest_round(self.store, self.session_id)
        pair = latest and policy.combine_pair(self.store, self.session_id, self.settings,
                                              latest)
        if not pair:
            return []
        kernel_id = self._combine(latest["id"], *pair)
        return self._verify_and_repair(kernel_id) if kernel_id else []

    def _combine(self, round_id: int, first: int, second: int) -> int | None:
        """Ask for one kernel merging two kernels' strengths; stored as the round's combine
        idea (its seed the first kernel) and its kernel, both parents recorded."""
        figures = [context.seed_text(self.store, self.problem_id, k) for k in (first, second)]
        idea_id = self.store.add_idea(
            round_id, f"Combine kernel {first} with kernel {second} (two lineages): keep "
            "what makes each fast.", author="combine", seed_kernel_id=first,
            status="implemented")
        self._emit(events.IdeaAdded(idea_id))
        prompt = self.prompts.render(
            "combine", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(), first=figures[0], second=figures[1],
            conventions=self._conventions())
        completion = self.calls.ask("combine", prompt, round_id, idea_id=idea_id)
        return self._store_kernel("combine", prompt, completion,
                                  self.store.get("ideas", idea_id), parent_id=first, attempt=0,
                                  second_parent=second)
