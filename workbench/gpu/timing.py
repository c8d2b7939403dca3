"""A/B-interleaved GPU timing with L2 flush, warm-up and statistical stopping.
Imports only torch and the standard library (runs inside the GPU worker)."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import torch

from workbench.gpu import inputs as inp
from workbench.gpu.stats import median, rel_half_width


@dataclass
class Series:
    gpu_ms: list[float] = field(default_factory=list)
    host_ms: list[float] = field(default_factory=list)


class L2Flusher:
    """Writes a buffer twice the size of L2 before each timed call, so each call starts cold."""

    def __init__(self) -> None:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        self.buf.zero_()


def timed_call(fn, args, flush: L2Flusher, Event, sync, clock) -> tuple[float, float, object]:
    """One cold call: flush, events around the call, then a device-wide sync so work hidden on
    other streams lands before the host clock stops. Returns (event ms, host ms, output)."""
    flush()
    start, end = Event(enable_timing=True), Event(enable_timing=True)
    h0 = clock()
    start.record()
    out = fn(*args)
    end.record()
    sync()
    h1 = clock()
    return start.elapsed_time(end), (h1 - h0) * 1e3, out


def _no_beat() -> None:
    pass


def warm_up(fn, args, flush: L2Flusher, Event, sync, clock, cap_s: float = 3.0,
            beat=_no_beat) -> int:
    """Run until the clock has ramped (idle ~345 MHz, loaded ~1980 MHz on an H200): successive
    groups of five calls agree within 2%, after at least 0.2 s. `beat()` before each call
    tells the parent's watchdog the turn is alive."""
    t0 = clock()
    prev, calls = None, 0
    while True:
        group = []
        for _ in range(5):
            beat()
            group.append(timed_call(fn, args, flush, Event, sync, clock)[0])
        calls += 5
        cur = median(group)
        elapsed = clock() - t0
        if elapsed > cap_s or (prev and elapsed > 0.2 and abs(cur - prev) <= 0.02 * prev):
            return calls
        prev = cur


def interleaved(contenders: dict, base: list, flush: L2Flusher, budget_s: float,
                target_rel: float, seed: int, check, Event, sync, clock,
                min_rounds: int = 20, max_rounds: int = 20000,
                beat=_no_beat) -> tuple[dict, int, list]:
    """Time every contender once per round, in a shuffled order, each on fresh inputs (the same
    values for all contenders in a round). `check(round, outputs)` sees the outputs of ~10% of
    rounds (and the first two) and returns a failure reason or None.
    Returns (series per contender, rounds, failures)."""
    rng = random.Random(seed)
    series = {name: Series() for name in contenders}
    names = list(contenders)
    numel = max((t.numel() for t in inp.tensors(base)), default=1)
    masks = inp.zero_masks(base)
    failures: list = []
    t0 = clock()
    rounds = 0
    while rounds < max_rounds:
        shift = rng.randrange(1, max(numel, 2))
        rng.shuffle(names)
        keep = rounds < 2 or rng.random() < 0.1
        outputs = {}
        for name in names:
            args = inp.rolled(base, shift, masks)
            beat()
            g, h, out = timed_call(contenders[name], args, flush, Event, sync, clock)
            series[name].gpu_ms.append(g)
            series[name].host_ms.append(h)
            if keep:
                outputs[name] = out
            del out, args
        if keep:
            reason = check(rounds, outputs)
            if reason:
                failures.append(reason)
        outputs.clear()
        rounds += 1
        if rounds >= min_rounds and rounds % 5 == 0:
            if all(rel_half_width(s.gpu_ms) <= target_rel for s in series.values()):
                break
        if clock() - t0 > budget_s and rounds >= min(min_rounds, 5):
            break
    return series, rounds, failures


# Bump when measure_ceilings measures something new: cached tables of an older version are redone.
CEILINGS_VERSION = 2


def measure_ceilings(Event) -> dict:
    """Copy bandwidth (bytes read + written) and matmul rates on this GPU: fp32 without TF32
    (CUDA cores), fp16 and bf16 (tensor cores, fp32 accumulation)."""
    def best_ms(fn, reps=6):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            s, e = Event(enable_timing=True), Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        return min(times)

    n = 1 << 28  # 1 GiB of fp32
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    copy_ms = best_ms(lambda: dst.copy_(src))
    del src, dst
    rates = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
        ms = best_ms(lambda: a @ b, reps=3)
        rates[str(dtype).removeprefix("torch.")] = 2 * 8192 ** 3 / (ms * 1e-3)
        del a, b
    torch.cuda.empty_cache()
    return {"bytes_per_s": 2 * n * 4 / (copy_ms * 1e-3), "flops_per_s": rates,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
