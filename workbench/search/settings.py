"""A session's search settings, stored as JSON on the session row, and the search's errors."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from workbench.gpu.executor import EvalSettings


class SearchError(Exception):
    """A session that cannot start or continue; str() is one line."""


class Stop(Exception):
    """Stop the session after the work in hand (budget, API failure, cancel)."""


@dataclass
class SearchSettings:
    rounds: int = 5               # R, as in the CRFM post
    ideas: int = 4                # N ideas per seed per round
    impls: int = 2                # M implementations per approved idea
    top_k: int = 4                # k best kernels seed the next round
    repairs: int = 1              # repair attempts per failed implementation
    refines: int = 1              # serial "make it faster" calls for each round's top-k kernels
    profile_seeds: bool = True    # Nsight Compute profile of each seed before ideation (if ncu)
    profile_timeout_s: float = 300.0
    review: bool = False          # ideas wait for a human before implementation
    budget_usd: float | None = None
    budget_tokens: int | None = None
    history_limit: int = 40       # past ideas shown to ideation
    budget_wall_s: float | None = None     # stop a run after this long (a resumed run: again)
    budget_gpu_s: float | None = None      # stop once verification used this much GPU time
    stop_at_roofline: float | None = None  # finish when a kernel reaches this fraction of
    #                                        the roofline floor's speed (e.g. 0.8)
    seed_kernels: list[int] = field(default_factory=list)   # bank kernels seeding round 0
    combine: bool = False         # from round 1: one kernel merging two lineages' best
    judge_ideas: bool = False     # a model judges restatements an exact match misses
    models: dict[str, list[dict]] = field(default_factory=dict)   # role -> [{provider,
    #                                        model, base_url, weight}]; unnamed roles: default
    eval: EvalSettings = field(default_factory=EvalSettings)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SearchSettings":
        known = {f.name for f in fields(cls)} - {"eval"}
        eval_known = {f.name for f in fields(EvalSettings)}
        return cls(**{k: v for k, v in data.items() if k in known},
                   eval=EvalSettings(**{k: v for k, v in (data.get("eval") or {}).items()
                                        if k in eval_known}))


def default_concurrency(settings: SearchSettings) -> int:
    """LLM calls at once when the user sets none: a whole round's N x M implementations."""
    return max(4, settings.ideas * settings.impls)
