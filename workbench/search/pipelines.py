"""The pieces of work: ideate a round's seeds, implement ideas, verify kernels, repair failures.

A mixin of Engine (engine.py), which owns the state these methods share: the store, the
settings, the LLM calls (calls.py), the executor and the run control. Policy (policy.py) says
what each piece works on; the pieces store everything they produce as they go.
"""
from __future__ import annotations

import json
from concurrent.futures import CancelledError, Future
from typing import Callable

from workbench import events
from workbench.bank import examples_text
from workbench.evidence import render
from workbench.gpu.executor import Executor
from workbench.gpu.verdict import empty as empty_verdict
from workbench.gpu.verifier import record, request_for, reused_verdict
from workbench.lessons import lessons_text
from workbench.llm.base import Completion
from workbench.llm.parse import KINDS, extract_code, parse_ideas
from workbench.llm.prompts import Prompts
from workbench.problems import Problem
from workbench.search import context, policy, queries
from workbench.search.calls import LLMCalls, RunControl
from workbench.search.settings import SearchSettings, Stop
from workbench.source_key import source_key, text_key
from workbench.store import Store

ORIGINS = {"implement": "llm", "repair": "repair", "refine": "refine",   # call -> kernel origin
           "combine": "combine"}


class Pipelines:
    store: Store
    session_id: int
    problem: Problem
    problem_id: int
    settings: SearchSettings
    prompts: Prompts
    executor: Executor
    calls: LLMCalls
    control: RunControl
    _futures: dict[int, Future]
    _emit: Callable[[object], None]
    _parallel: Callable[[Callable, list[tuple]], list]
    _count_gpu: Callable[[dict], None]
    _judge_restatements: Callable[[int, int | None, list[str]], dict[int, int]]

    # -- ideation ------------------------------------------------------------------------------
    def _choose_seeds(self, n: int) -> list[int | None]:
        return [s["kernel_id"] for s in self._seed_choice(n)]

    def _seed_choice(self, n: int) -> list[dict]:
        return policy.choose_seeds(self.store, self.session_id, self.problem_id, self.settings, n)

    def _ideate(self) -> int:
        latest = queries.latest_round(self.store, self.session_id)
        if latest is None or not policy.seeds_to_ideate(self.store, latest):
            latest = self._start_round(latest)
        round_id = latest["id"]
        # One seed after another, so each ideation sees the ideas the round's other seeds got.
        for seed_id in policy.seeds_to_ideate(self.store, latest):
            self.control.check()
            self._ideate_seed(round_id, seed_id)
        self._ideation_done(round_id)
        return round_id

    def _start_round(self, latest: dict | None) -> dict:
        """Open the round after `latest` (round 0 when None), seeded from the archive."""
        n = 0 if latest is None else latest["n"] + 1
        choice = self._seed_choice(n)
        seeds = [s["kernel_id"] for s in choice]
        round_id = queries.start_round(self.store, self.session_id, n, seeds,
                                       latest["id"] if latest else None, choice)
        self._emit(events.RoundStarted(self.session_id, round_id, n))
        for s in choice:
            name = "reference" if s["kernel_id"] is None else f"kernel {s['kernel_id']}"
            cell = f" [{s['cell']}]" if s["cell"] else ""
            self._emit(events.Progress(f"round {n} seed: {name}{cell}: {s['reason']}"))
        return self.store.get("rounds", round_id)

    def _ideation_done(self, round_id: int) -> None:
        """After each ideation: once every seed of the round has its ideas, implementation
        (or the human's review) comes next."""
        if not policy.seeds_to_ideate(self.store, self.store.get("rounds", round_id)):
            self.store.update("rounds", round_id, status="implementing")
            pending = policy.pending_review(self.store, self.session_id, self.settings)
            if pending:
                self._emit(events.ReviewNeeded(round_id, pending))

    def _ideate_seed(self, round_id: int, seed_id: int | None) -> None:
        self._profile_seed(seed_id)
        history, untried = context.history(self.store, self.session_id,
                                           self.settings.history_limit)
        evidence = self._evidence(seed_id)
        prompt = self.prompts.render(
            "ideate", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(),
            seed=context.seed_text(self.store, self.problem_id, seed_id),
            history=history, untried_kinds=untried, n=self.settings.ideas,
            kinds="\n".join(f"- {k}: {d}" for k, d in KINDS.items()),
            gpu=render.gpu_text(self.store, self.problem_id), evidence=evidence.text,
            bottleneck=render.bottleneck_of(self.store, seed_id),
            lessons=lessons_text(self.store, self.problem.family),
            examples=examples_text(self.store, self.problem_id, self.problem.family,
                                   self.session_id))
        completion = self.calls.ask("ideate", prompt, round_id, kernel_id=seed_id)
        ideas = parse_ideas(completion.text, limit=self.settings.ideas)
        error = None if ideas else "no ideas found in the response"
        status = "proposed" if self.settings.review else "approved"
        judged = self._judge_restatements(round_id, seed_id, [i.text for i in ideas])
        idea_ids, echoes = [], []
        with self.store.transaction():
            call_id = self.calls.record("ideate", prompt, round_id, None, seed_id, completion,
                                        error, None if ideas else "no_ideas", evidence.given)
            for index, idea in enumerate(ideas):
                # A restatement of an idea the session already has is merged into it (an
                # echo), never implemented twice.
                first = judged.get(index) or queries.idea_with_key(
                    self.store, self.session_id, text_key(idea.text))
                if first is not None:
                    queries.add_idea_echo(self.store, first, round_id, seed_id, call_id,
                                          idea.text)
                    echoes.append(first)
                    continue
                idea_ids.append(self.store.add_idea(
                    round_id, idea.text, author="llm", kind=idea.kind, seed_kernel_id=seed_id,
                    llm_call_id=call_id, status=status))
        self.calls.done(call_id, "ideate", completion, error)
        for idea_id in idea_ids:
            self._emit(events.IdeaAdded(idea_id))
        if echoes:
            self._emit(events.Progress(
                f"{len(echoes)} idea(s) restated ideas already tried, merged into "
                + ", ".join(f"idea {i}" for i in echoes)))

    # -- implementation --------------------------------------------------------------------------
    def _implement(self, round_id: int | None = None) -> list[int]:
        jobs = [(idea, self.settings.impls - missing + j)
                for idea, missing in policy.implementable(self.store, self.session_id,
                                                          self.settings)
                if round_id is None or idea["round_id"] == round_id
                for j in range(missing)]
        results = self._parallel(self._implement_one, jobs)
        self._mark_implemented(round_id)
        return [kid for chain in results for kid in chain]

    def _mark_implemented(self, round_id: int | None) -> None:
        """Ideas with all M implementations written are 'implemented'."""
        with self.store.transaction():
            for idea in queries.round_ideas_with_impl_counts(self.store, self.session_id,
                                                             round_id):
                if (self.settings.impls - idea["done"] <= 0
                        and idea["status"] in ("approved", "edited", "proposed")):
                    self.store.set_idea_status(idea["id"], "implemented")

    def _implement_one(self, idea: dict, slot: int) -> list[int]:
        kernel_id = self._implement_call(idea, slot)
        return self._verify_and_repair(kernel_id) if kernel_id else []

    def _implement_call(self, idea: dict, slot: int) -> int | None:
        """Ask for implementation `slot` (0-based) of an idea and store it; not verified yet."""
        evidence = self._evidence(idea["seed_kernel_id"])
        prompt = self.prompts.render(
            "implement", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(),
            seed=context.seed_text(self.store, self.problem_id, idea["seed_kernel_id"]),
            idea=idea["text"], kind=idea["kind"] or "unspecified",
            variant=context.variant(slot, self.settings.impls),
            conventions=self._conventions(), gpu=render.gpu_text(self.store, self.problem_id),
            evidence=evidence.text)
        completion = self.calls.ask("implement", prompt, idea["round_id"], idea_id=idea["id"])
        return self._store_kernel("implement", prompt, completion, idea,
                                  parent_id=idea["seed_kernel_id"], attempt=0,
                                  evidence=evidence.given)

    def _conventions(self) -> str:
        return self.prompts.render("conventions", dtype=self.problem.dtype).rstrip()

    def _evidence(self, kernel_id: int | None) -> render.Evidence:
        """What the hardware showed for a prompt's starting point (none for the reference)."""
        if kernel_id is None:
            return render.Evidence("None yet: the starting point is the PyTorch reference.")
        return render.kernel_text(self.store, kernel_id)

    def _store_kernel(self, purpose: str, prompt: str, completion: Completion, idea: dict | None,
                      parent_id: int | None, attempt: int, repaired_id: int | None = None,
                      evidence: dict | None = None,
                      second_parent: int | None = None) -> int | None:
        """Store the call and the kernel it wrote together (or the call alone, as a failure)."""
        code = extract_code(completion.text)
        error = None if code else "no code defining ModelNew in the response"
        idea_id = idea["id"] if idea else None
        round_id = idea["round_id"] if idea else None
        original = None
        with self.store.transaction():   # the lookup and the insert together: no race
            call_id = self.calls.record(purpose, prompt, round_id,
                                        idea_id if purpose in ("implement", "combine")
                                        else None,
                                        repaired_id, completion, error,
                                        None if code else "no_code", evidence)
            kernel_id = None
            if code:
                original = queries.kernel_with_key(self.store, self.session_id,
                                                   source_key(code))
                kernel_id = self.store.add_kernel(
                    self.problem_id, code, session_id=self.session_id, idea_id=idea_id,
                    parent_id=parent_id, origin=ORIGINS[purpose],
                    llm_call_id=call_id, attempt=attempt, duplicate_of=original)
                if second_parent is not None:
                    self.store.update("kernels", kernel_id, second_parent_id=second_parent)
        self.calls.done(call_id, purpose, completion, error)
        if kernel_id:
            self._emit(events.KernelAdded(kernel_id))
        if original is not None:
            self._emit(events.Progress(f"kernel {kernel_id} is kernel {original} again "
                                       "(same code, comments and layout aside): not verified"))
        return kernel_id

    # -- verification and repair -----------------------------------------------------------------
    def _verify_and_repair(self, kernel_id: int) -> list[int]:
        chain = [kernel_id]
        while True:
            if self.store.get("kernels", chain[-1])["duplicate_of"] is not None:
                return chain   # the same code as a kernel verified (or verifying) already
            verdict = self._evaluate([chain[-1]])[0]
            if (verdict["status"] not in policy.REPAIRABLE
                    or chain[-1] not in policy.repairable(self.store, self.session_id,
                                                          self.settings)):
                return chain
            repaired = self._repair_one(chain[-1])
            if repaired is None:
                return chain
            chain.append(repaired)

    def _repair(self, kernel_ids: list[int]) -> list[int]:
        results = self._parallel(self._repair_chain, [(k,) for k in kernel_ids])
        return [kid for chain in results for kid in chain]

    def _repair_chain(self, kernel_id: int) -> list[int]:
        repaired = self._repair_one(kernel_id)
        return self._verify_and_repair(repaired) if repaired else []

    def _repair_one(self, kernel_id: int) -> int | None:
        kernel = self.store.get("kernels", kernel_id)
        idea = self.store.get("ideas", kernel["idea_id"]) if kernel["idea_id"] else None
        ev = self.store.latest_evaluation(kernel_id)
        detail = ev["error"] or ""
        flags = json.loads(ev["flags"] or "[]")
        detail += "".join(f"\nflag [{f.get('kind')}]: {f.get('reason')}" for f in flags)
        for trial in json.loads(ev["trial_errors"] or "[]"):
            if not trial.get("ok") and trial.get("reason"):
                detail += f"\ntrial {trial.get('trial')}: {trial['reason']}"
        evidence = self._evidence(kernel_id)
        prompt = self.prompts.render(
            "repair", problem_name=self.problem.name, dtype=self.problem.dtype,
            problem_source=self.problem.source.rstrip(),
            idea=idea["text"] if idea else "(a hand-edited kernel)",
            kind=(idea["kind"] if idea else None) or "unspecified", status=ev["status"],
            source=kernel["source"].rstrip(), error=detail.strip()[-4000:] or "(no message)",
            conventions=self._conventions(), gpu=render.gpu_text(self.store, self.problem_id),
            evidence=evidence.text)
        completion = self.calls.ask("repair", prompt, idea["round_id"] if idea else None,
                                    kernel_id=kernel_id)
        return self._store_kernel("repair", prompt, completion, idea, parent_id=kernel_id,
                                  attempt=kernel["attempt"] + 1, repaired_id=kernel_id,
                                  evidence=evidence.given)

    def _evaluate(self, kernel_ids: list[int], retime: bool = False) -> list[dict]:
        """Verify kernels; one whose source (comments and layout aside) already has a lasting
        verdict for this problem and these settings, from any session, gets a copy of it
        (`reused_from` names the original) unless `retime` asks for a new measurement."""
        submitted = []
        for kid in kernel_ids:
            self.control.check()
            source = self.store.get("kernels", kid)["source"]
            request = request_for(self.problem, source, self.settings.eval, label=f"kernel {kid}")
            reused = None if retime else reused_verdict(self.store, request)
            if reused is not None:   # its verdict is known: a future already done
                done: Future = Future()
                done.set_result(reused)
                submitted.append((kid, done))
                continue
            try:
                future = self.executor.submit(request)
            except Exception as e:  # noqa: BLE001 - e.g. a pool shut down to stop quickly
                if self.control.cancel.is_set():
                    raise self.control.stop() from None
                raise Stop(f"verifier unavailable: {type(e).__name__}: {e}") from None
            with self.control.lock:
                self._futures[kid] = future
            self._emit(events.EvaluationStarted(kid))
            submitted.append((kid, future))
        verdicts, cancelled = [], []
        try:
            for kid, future in submitted:
                try:
                    verdict = future.result()
                except CancelledError:   # stopped on purpose: no verdict, verified on resume
                    cancelled.append(kid)
                    continue
                except Exception as e:  # noqa: BLE001 - the executor's failure, not the kernel's
                    if self.control.cancel.is_set():   # e.g. the pool was shut down to stop
                        cancelled.append(kid)
                        continue
                    raise Stop(f"verifier failed on kernel {kid}: {type(e).__name__}: {e}") \
                        from None
                verdict = {**empty_verdict(verdict.get("status", "crashed")), **verdict}
                record(self.store, kid, verdict)
                if not verdict.get("reused_from"):
                    self._count_gpu(verdict)
                self._emit(events.VerdictReady(kid, verdict["status"],
                                               verdict.get("speedup_eager")))
                verdicts.append(verdict)
        finally:
            with self.control.lock:
                for kid, _ in submitted:
                    self._futures.pop(kid, None)
        if cancelled:
            self._emit(events.EvaluationsCancelled(cancelled))
            raise self.control.stop()
        return verdicts
