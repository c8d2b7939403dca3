"""The verifier's executor interface: submit a candidate, get a verdict.

Callers (the `eval` command, the search loop, the TUI) see only `Executor`; the local pool
(workbench.gpu.pool) implements it for the GPUs of this machine, and a cluster engine can take
its place later without touching them.
"""
from __future__ import annotations

import hashlib
import json
from concurrent.futures import CancelledError, Future
from dataclasses import asdict, dataclass, field
from typing import Protocol

from workbench import cuda_env
from workbench.source_key import source_key

# Settings that change how long work may take or how much runs at once, never what a verdict says.
_NOT_IN_VERDICT = ("compile_timeout_s", "run_timeout_s", "verify_workers")


@dataclass
class EvalSettings:
    atol: float | None = None          # None: the problem's own tolerance
    rtol: float | None = None
    trials: int = 6                    # correctness trials, cycling over input distributions
    time_budget_s: float = 4.0         # per-candidate timing budget (A/B loop)
    target_rel_ci: float = 0.01        # stop when the 95% CI half-width <= this x median
    compile_timeout_s: float = 300.0
    run_timeout_s: float = 180.0       # worker start-up, and a whole GPU turn (a hung call is
                                       # killed far sooner: see workbench.gpu.watchdog)
    time_reference_compile: bool = True
    baseline: str = "default"          # eager/compile math: default | strict | tf32 (gpu/baseline.py)
    no_gpu: bool = False               # compile + static guards only
    verify_workers: int | None = None  # candidates in flight at once; None: from cores and GPUs

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EvalRequest:
    problem_name: str
    problem_source: str
    candidate_source: str
    atol: float                        # resolved tolerance (problem default or override)
    rtol: float
    flops: int | None
    min_bytes: int
    dtype: str = "float32"
    settings: EvalSettings = field(default_factory=EvalSettings)
    label: str = ""                    # shown in progress output (e.g. "kernel 42")

    def reuse_key(self) -> str:
        """Same key, same verdict: the problem, the candidate's normalised source (comments and
        layout out), every setting that can change the verdict, and the torch that runs it (an
        upgraded torch times the reference anew)."""
        settings = {k: v for k, v in self.settings.to_dict().items() if k not in _NOT_IN_VERDICT}
        problem = hashlib.sha256(self.problem_source.encode()).hexdigest()
        return hashlib.sha256(json.dumps(
            ["reuse v2", problem, source_key(self.candidate_source), settings, self.atol,
             self.rtol, self.flops, self.min_bytes, self.dtype, cuda_env.torch_version()],
            sort_keys=True).encode()
        ).hexdigest()


class EvaluationCancelled(CancelledError):
    """The evaluation was stopped before it finished (Ctrl-C, cancel, quit): there is no verdict,
    and the kernel is verified again when its session resumes."""


class Executor(Protocol):
    """Submit candidates; each future resolves to a verdict dict (see workbench.gpu.verdict).

    A cancelled evaluation (`cancel`, or `shutdown(cancel=True)`) resolves to CancelledError,
    never to a verdict: a worker killed on purpose did not crash.
    """

    def submit(self, request: EvalRequest) -> Future: ...

    def cancel(self, futures: list[Future]) -> None:
        """Stop these evaluations: queued ones never start, running workers are killed."""

    def shutdown(self, cancel: bool = False) -> None: ...
