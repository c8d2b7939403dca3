"""Search pipeline benchmark (CPU only): how long a round takes and how long the model waits.

A local server answers like a model, every answer after LATENCY seconds (ideas, then kernels);
a fake verifier returns each verdict after VERDICT seconds on W workers (a cached build plus
the GPU work of a verdict). Measured from the stored LLM calls (start = created_at - latency):

- round 1 alone: 1 seed x 3 ideas x 2 implementations, all correct: session wall time;
- two rounds, one implementation failing and repaired: the longest stretch with no call in
  flight (the model idle), overall and between the rounds.

Each for the pipelined engine (Engine.run) and the phase-wise one (Engine.step in a loop).

usage: python bench/search_pipeline.py [--latency 10] [--verdict 1.5] [--workers 4]
                                      [--refines 0] [--out F.md]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from llm_server import FakeExecutor, FakeLLMServer, Reply  # noqa: E402
from workbench.llm import make_provider  # noqa: E402
from workbench.llm.prices import PriceTable  # noqa: E402
from workbench.problems import Problem  # noqa: E402
from workbench.search import Engine, SearchSettings, new_session  # noqa: E402
from workbench.store import Store  # noqa: E402

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
'''
KINDS = ("memory", "parallelism", "control_flow")


class Answers:
    """Distinct ideas per ideation call; distinct kernels; the first kernel of the session
    fails to compile (its repair is correct), so a repair chain runs across the round's end."""

    def __init__(self, latency: float, fail_one: bool):
        self.latency = latency
        self.fail_one = fail_one
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, prompt: str, request) -> Reply:
        with self.lock:
            self.n += 1
            n = self.n
        if "Propose" in prompt:
            ideas = [{"kind": k, "idea": f"Idea {n}.{i}: change the {k} strategy, way {n}."}
                     for i, k in enumerate(KINDS)]
            return Reply(text=f"```json\n{json.dumps(ideas)}\n```", delay_s=self.latency)
        verdict = "compile_error" if self.fail_one and n == 2 else f"correct {1 + n / 10:.1f}"
        return Reply(text=("```python\nimport torch\nimport torch.nn as nn\n"
                           f"# VERDICT: {verdict}\nTAG = {n}\n\nclass ModelNew(nn.Module):\n"
                           "    def forward(self, x):\n        return torch.relu(x)\n```"),
                     delay_s=self.latency)


class Verifier(FakeExecutor):
    def __init__(self, verdict_s: float, workers: int):
        super().__init__(delay_s=verdict_s)
        self._pool = ThreadPoolExecutor(max_workers=workers)


def call_spans(store: Store, session_id: int) -> list[tuple[float, float, int]]:
    spans = []
    for c in store.rows("llm_calls", "session_id = ?", [session_id]):
        end = datetime.fromisoformat(c["created_at"]).timestamp()
        spans.append((end - (c["latency_s"] or 0.0), end, c["round_id"]))
    return sorted(spans)


def idle_gaps(spans: list[tuple[float, float, int]]) -> list[float]:
    """Stretches with no call in flight between the first call's start and the last's end."""
    gaps, reach = [], None
    for start, end, _ in spans:
        if reach is not None and start > reach:
            gaps.append(start - reach)
        reach = end if reach is None else max(reach, end)
    return gaps


def between_rounds(store: Store, session_id: int, spans) -> float:
    """The model's idle time just before round 1's first call: from the latest end of the
    calls started before it (0 when one was still in flight) to that first call."""
    rounds = store.rows("rounds", "session_id = ?", [session_id], order_by="n")
    if len(rounds) < 2:
        return 0.0
    first1 = min(s for s, _, r in spans if r == rounds[1]["id"])
    before = [e for s, e, _ in spans if s < first1]
    return max(0.0, first1 - max(before)) if before else 0.0


def session(args, rounds: int, pipelined: bool, fail_one: bool) -> dict:
    answers = Answers(args.latency, fail_one)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(responder=answers) as server:
        store = Store(Path(tmp) / "bench.db")
        problem = Problem(name="relu", path=Path(tmp) / "relu.py", source=PROBLEM,
                          hash=hashlib.sha256(PROBLEM.encode()).hexdigest(), family="activation",
                          dtype="float32", atol=1e-4, rtol=1e-4, flops=1 << 24,
                          min_bytes=128 << 20)
        settings = SearchSettings(rounds=rounds, ideas=3, impls=2, top_k=1, repairs=1,
                                  refines=args.refines)
        sid = new_session(store, problem, "openai", "bench", server.openai_url, settings)
        provider = make_provider("openai", "bench", server.openai_url, timeout_s=120,
                                 retries=0, concurrency=args.concurrency or 6,
                                 prices=PriceTable({"bench": (1.0, 1.0)}))
        verifier = Verifier(args.verdict, args.workers)
        engine = Engine(store, sid, provider, verifier)
        t0 = time.monotonic()
        if pipelined:
            outcome = engine.run()
        else:
            while engine.step():
                pass
            outcome = engine.next_action()
        wall = time.monotonic() - t0
        verifier.shutdown()
        spans = call_spans(store, sid)
        gaps = idle_gaps(spans)
        return {"outcome": outcome, "wall_s": wall, "calls": len(spans),
                "max_idle_s": max(gaps, default=0.0),
                "between_rounds_s": between_rounds(store, sid, spans),
                "kernels": len(store.rows("kernels", "session_id = ?", [sid]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=10.0, help="seconds per LLM answer")
    parser.add_argument("--verdict", type=float, default=1.5, help="seconds per verdict")
    parser.add_argument("--workers", type=int, default=4, help="verifier workers")
    parser.add_argument("--concurrency", type=int, default=None, help="LLM calls at once")
    parser.add_argument("--refines", type=int, default=0,
                        help="refine calls per top-k kernel (the issue's scenario: 0)")
    parser.add_argument("--out", help="append a Markdown section to this file")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    rows = []
    for label, pipelined in (("pipelined (Engine.run)", True), ("phase-wise (step loop)", False)):
        one = session(args, rounds=1, pipelined=pipelined, fail_one=False)
        two = session(args, rounds=2, pipelined=pipelined, fail_one=True)
        rows.append((label, one, two))
        print(f"{label}: round 1 wall {one['wall_s']:.1f} s ({one['outcome']}); 2 rounds "
              f"wall {two['wall_s']:.1f} s, {two['calls']} calls, longest idle "
              f"{two['max_idle_s']:.1f} s, idle between rounds {two['between_rounds_s']:.1f} s",
              flush=True)
    table = [f"Answers {args.latency:g} s, verdicts {args.verdict:g} s on {args.workers} "
             f"workers, 1 seed x 3 ideas x 2 impls, top-k 1, 1 repair, {args.refines} "
             "refine(s).", "",
             "| engine | round 1 wall | 2 rounds wall | calls | longest model idle | idle "
             "between rounds |", "|---|---|---|---|---|---|"]
    for label, one, two in rows:
        table.append(f"| {label} | {one['wall_s']:.1f} s | {two['wall_s']:.1f} s | "
                     f"{two['calls']} | {two['max_idle_s']:.1f} s | "
                     f"{two['between_rounds_s']:.1f} s |")
    print("\n".join(table))
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
