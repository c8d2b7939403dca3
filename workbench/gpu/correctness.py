"""Correctness of a candidate against what the reference itself can distinguish. Imports only
torch and the standard library (runs inside the GPU worker, and in bench/kernelbench_sweep.py).

Each trial draws fresh inputs from the problem's get_inputs() (scaled or shifted where that keeps
the inputs' structure and the reference finite), runs the fp32 reference and a float64 copy of
it, and judges the candidate against the float64 answer with slack for the fp32 reference's own
rounding error. Repeated outputs and run-to-run differences count against the candidate only
where the reference's own behaviour differs.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from workbench.gpu import inputs as inp
from workbench.gpu import judge
from workbench.gpu.compare import compare, max_abs_diff, rms, rms_diff


@dataclass
class Answer:
    """The reference's answer for one input set."""
    refs: list                     # fp32 (the problem's dtype) outputs: shapes, dtypes, integers
    truths: list                   # float64 outputs where available, else refs
    slack: list[float]             # absolute slack per output (reference rounding + jitter)
    err_rel: float = 0.0           # reference's own error RMS / output RMS (worst output)
    mutates_inputs: bool = False   # the reference itself writes into its inputs


@dataclass
class Outcome:
    trials: int = 0
    trial_errors: list = field(default_factory=list)
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    failure: str | None = None     # why the candidate is incorrect
    unusable: str | None = None    # why nothing could be checked (the reference's fault)
    flags: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    reference_precision: str = "float64"
    reference_error_rel: float = 0.0
    input_independent: bool = False
    inputs: list = field(default_factory=list)   # structure() of the first draw
    ref64: Reference64 | None = None             # the float64 reference, for later checks

    def as_dict(self) -> dict:
        return {"trials": self.trials, "trial_errors": self.trial_errors,
                "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
                "reference_precision": self.reference_precision,
                "reference_error_rel": self.reference_error_rel,
                "input_independent": self.input_independent}


# A float64 run can take tens of times the fp32 one (cuDNN has no fast double convolutions),
# and the worker's watchdog allows one call at most 12 s: float64 is skipped (judged against
# fp32, as before) when the fp32 call times this slowdown would pass FLOAT64_BUDGET_S.
FLOAT64_ALLOW_S = 12.0
FLOAT64_SLOWDOWN = 50.0
FLOAT64_BUDGET_S = 10.0


def _no_beat(**_) -> None:
    pass


def _finite(tensors: list) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


def _sync() -> None:
    if inp.DEVICE == "cuda":
        torch.cuda.synchronize()


class Reference64:
    """A float64 copy of the reference, made on first use; None-like when float64 fails."""

    def __init__(self, ref: torch.nn.Module) -> None:
        self._ref = ref
        self.model = None
        self.error: str | None = None

    def __call__(self, base: list, fp32_s: float = 0.0) -> list | None:
        if self.error:
            return None
        if fp32_s * FLOAT64_SLOWDOWN > FLOAT64_BUDGET_S:
            self.error = (f"skipped: one fp32 call takes {fp32_s:.2f} s, float64 could outlast "
                          "the watchdog")
            return None
        try:
            if self.model is None:
                self.model = copy.deepcopy(self._ref).to(torch.float64)
            out = inp.tensors(self.model(*inp.to_float64(base)))
        except Exception as e:  # noqa: BLE001 - ops without float64 kernels: judge against fp32
            self.error, self.model = f"{type(e).__name__}: {e}"[:200], None
            return None
        return [o.detach() for o in out]


def answer(ref, ref64: Reference64, base: list, jitter_rel: list[float] | None = None,
           beat=_no_beat) -> Answer | None:
    """The reference's outputs for `base`, the float64 truth and the slack; None when the
    reference gives NaN/inf here (the inputs, not the candidate, are to blame). `beat` is called
    before each call on the GPU (the worker's watchdog)."""
    beat()
    ref_in = inp.clone(base)
    start = time.perf_counter()
    out = ref(*ref_in)
    _sync()
    fp32_s = time.perf_counter() - start
    mutates = not inp.same_values(ref_in, base)
    del ref_in
    refs = [o.detach().clone() for o in inp.tensors(out)]
    for o in inp.tensors(out):
        if o.is_floating_point():
            o.fill_(float("nan"))  # scrub: the candidate must not find the answer here
    del out
    if not _finite(refs):
        return None
    beat(allow_s=FLOAT64_ALLOW_S)
    truths = ref64(base, fp32_s)
    beat()
    if truths is None or len(truths) != len(refs) or not _finite(truths) or \
            any(t.shape != r.shape for t, r in zip(truths, refs)):
        truths = refs
    slack, err_rel = [], 0.0
    for k, (r, t) in enumerate(zip(refs, truths)):
        if not r.is_floating_point():
            slack.append(0.0)
            continue
        # Without a float64 truth (t is r) the run-to-run jitter is all that is known of the
        # reference's own error, and it counts in every trial, not only the first (cuDNN's LSTM
        # on the H200 failed its own copy on a later trial, 7.6e-6 off where 4.2e-6 was allowed).
        err = rms_diff(r, t) if t is not r else 0.0
        scale = rms(t)
        jitter = (jitter_rel[k] if jitter_rel else 0.0) * scale
        slack.append(judge.allowance(err, jitter))
        err_rel = max(err_rel, err / scale if scale > 0 else (0.0 if err == 0 else float("inf")))
    return Answer(refs, truths, slack, err_rel, mutates)


def _jitter(ref, base: list, a: Answer, beat) -> list[float]:
    """The reference's own run-to-run difference on the same inputs, relative to its RMS."""
    beat()
    again = [o.detach() for o in inp.tensors(ref(*inp.clone(base)))]
    rel = []
    for r, o in zip(a.refs, again):
        if not r.is_floating_point():
            rel.append(0.0)
            continue
        scale = rms(r)
        diff = max_abs_diff(o, r)
        rel.append(diff / scale if scale > 0 else 0.0)
    return rel


def _fingerprint(tensors: list) -> list:
    return [(float(g.sum(dtype=torch.float64)) if g.is_floating_point() else float(g.sum()),
             g.reshape(-1)[:64].cpu()) for g in tensors]


def _same_fingerprint(a, b) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] and torch.equal(x[1], y[1]) for x, y in zip(a, b))


def _draw(problem, ref, ref64, seed: int, wanted: str, dropped: set, shape_info, jitter, outcome,
          trial: int, beat):
    """Inputs and the reference's answer for one trial, redrawing while the reference is not
    finite (a variant that broke it is dropped). None after MAX_REDRAWS failed draws."""
    for attempt in range(judge.MAX_REDRAWS + 1):
        dist, s = judge.next_draw(wanted, dropped, seed, attempt)
        base = inp.generate(problem, s, dist, shape_info)
        a = answer(ref, ref64, base, jitter, beat)
        if a is not None:
            return dist, base, a
        if dist != "default":
            dropped.add(dist)
        outcome.trial_errors.append({"trial": trial, "distribution": dist, "ok": None,
                                     "reason": "reference gives NaN/inf on these inputs: redrawn"})
    return None


def check(problem, ref, cand, seeds: list[int], trials: int, atol: float, rtol: float,
          beat=_no_beat) -> Outcome:
    """Run `trials` checks of `cand` against `ref` on inputs from `seeds[1:]`."""
    outcome = Outcome()
    ref64 = outcome.ref64 = Reference64(ref)
    first = inp.generate(problem, seeds[1], "default")
    outcome.inputs = inp.structure(first)
    del first
    declared = getattr(problem, "INPUT_VARIANTS", None)
    plan = judge.variant_plan(declared, trials)
    dropped: set = set()
    jitter = None
    prev = None          # (candidate fingerprint, reference outputs) of the last good trial
    distinguishable_seen = False
    with torch.no_grad():
        for i, wanted in enumerate(plan):
            beat()
            drawn = _draw(problem, ref, ref64, seeds[1 + i], wanted, dropped, outcome.inputs,
                          jitter, outcome, i, beat)
            if drawn is None:
                outcome.unusable = (f"the reference gives NaN/inf on {judge.MAX_REDRAWS + 1} fresh "
                                    "draws of its own inputs: nothing to check against")
                return outcome
            dist, base, a = drawn
            if jitter is None:
                jitter = _jitter(ref, base, a, beat)
                a.slack = [s + judge.allowance(0.0, j * rms(t))
                           for s, j, t in zip(a.slack, jitter, a.truths)]
            outcome.reference_error_rel = max(outcome.reference_error_rel, a.err_rel)
            out_bytes = sum(r.numel() * r.element_size() for r in a.refs)
            inp.poison_allocator(4 * out_bytes + (64 << 20))
            cand_in = inp.clone(base)
            beat()
            got = cand(*cand_in)
            _sync()
            got_list = list(got) if isinstance(got, (list, tuple)) else [got]
            c = compare(got_list, a.refs, atol, rtol, truth=a.truths, slack=a.slack)
            entry = {"trial": i, "distribution": dist, "ok": c.ok, "max_abs_err": c.max_abs_err,
                     "max_rel_err": c.max_rel_err, "reason": c.reason}
            outcome.trial_errors.append(entry)
            outcome.max_abs_err = max(outcome.max_abs_err, c.max_abs_err)
            outcome.max_rel_err = max(outcome.max_rel_err, c.max_rel_err)
            if not a.mutates_inputs and not inp.same_values(cand_in, base):
                _add(outcome.flags, "input_mutation", "the candidate modified its input tensors "
                                                      "(the reference does not)")
            if not c.ok:
                outcome.failure = outcome.failure or f"trial {i} ({dist} inputs): {c.reason}"
                continue
            fingerprint = _fingerprint(inp.tensors(got))
            if prev is not None:
                # Against the float64 truths: two fp32 answers of an output that is rounding
                # noise differ by their noise alone (seen on the H200 for a mean that is 0).
                differ = not compare(a.truths, prev[1], atol, rtol, slack=a.slack).ok
                distinguishable_seen = distinguishable_seen or differ
                if judge.repeat_is_evidence(_same_fingerprint(fingerprint, prev[0]), differ):
                    outcome.failure = outcome.failure or \
                        f"trial {i}: same output as for different inputs"
                    entry.update(ok=False, reason="same output as the previous trial, although "
                                                  "the reference's outputs differ")
                    continue
            prev = (fingerprint, a.truths)
            outcome.trials += 1
            if i == 0:
                _determinism(cand, base, got_list, a, atol, rtol, out_bytes, outcome, beat)
            del got, got_list, cand_in
    outcome.input_independent = prev is not None and outcome.trials > 1 and not distinguishable_seen
    if ref64.error:
        outcome.reference_precision = f"as the problem's dtype (float64 failed: {ref64.error})"
    if outcome.input_independent:
        _add(outcome.notes, "input_independent", "the reference gives the same output for every "
             "input drawn: only that value is checked, and a repeated output is no evidence of "
             "caching")
    if outcome.reference_error_rel > 0.1:
        _add(outcome.notes, "noise_level_output",
             f"the reference's own rounding error is {100 * min(outcome.reference_error_rel, 9.99):.0f}%"
             " of its output's RMS: the output is rounding noise, checked to that level only")
    return outcome


def _determinism(cand, base, got_list, a: Answer, atol, rtol, out_bytes, outcome, beat) -> None:
    """The same inputs again, into freshly poisoned memory: the two runs may differ by what
    the reference's own rounding and run-to-run differences allow, no more."""
    inp.poison_allocator(4 * out_bytes + (64 << 20))
    beat()
    again = cand(*inp.clone(base))
    _sync()
    d = compare(again, got_list, atol, rtol, slack=a.slack)
    if not d.ok:
        _add(outcome.flags, "nondeterministic", f"two runs on the same inputs disagree: {d.reason}")


def _add(items: list, kind: str, reason: str) -> None:
    if not any(f["kind"] == kind for f in items):
        items.append({"kind": kind, "reason": reason})


def timing_slack(ref, strict: Answer, base: list, beat=_no_beat) -> list[float]:
    """Slack for comparing timed outputs with eager ones run under the baseline's math settings
    (TF32 convolutions by default): that eager answer's own error against the strict one."""
    beat()
    with torch.no_grad():
        eager = [o.detach().clone() for o in inp.tensors(ref(*inp.clone(base)))]
    slack = []
    for e, t, s in zip(eager, strict.truths, strict.slack):
        if not e.is_floating_point() or t.shape != e.shape:
            slack.append(s)
            continue
        slack.append(s + judge.allowance(rms_diff(e, t)))
    return slack
