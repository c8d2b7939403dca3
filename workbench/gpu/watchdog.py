"""Time limits for one worker, from its messages: load-proof build limits, adaptive GPU turns.

- Start-up and reference preparation: `run_timeout_s` from the worker's start.
- Build: `compile_timeout_s` of the candidate's own time. Waiting for a CPU slot (the parent
  queues builds instead of racing them) does not count, so a candidate that builds alone
  builds in any batch. (Each build runs in a builder process of its own: no build waits on
  another's lock.)
- GPU turn: the worker beats before each call; a call may run max(2 s, 100x the reference's
  eager call), at most 12 s, so a hang is killed well within 15 s whatever the problem; the
  whole turn is capped by `run_timeout_s`.
"""
from __future__ import annotations

import json
import queue
import threading
import time
from typing import Callable

from workbench.gpu.clean_build import BuildCancelled, BuildTimeout
from workbench.gpu.executor import EvalSettings
from workbench.gpu.workers import Worker

Builder = Callable[[dict, float, threading.Event], str]

CALL_MIN_S, CALL_FACTOR, CALL_MAX_S = 2.0, 100.0, 12.0
BUILD_PHASES = {"compiling", "build_queue", "building", "built"}
TURN_PHASES = {"gpu", "correctness", "timing"}
QUIET_PHASES = {"starting", "ready", "built"}  # not shown to users


def call_limit(eager_ms: float | None) -> float:
    """How long one call on the GPU may run before it counts as a hang."""
    if eager_ms is None:
        return CALL_MAX_S
    return min(CALL_MAX_S, max(CALL_MIN_S, CALL_FACTOR * eager_ms / 1e3))


class Watch:
    """The current deadline of one worker, moved by each message it sends."""

    def __init__(self, settings: EvalSettings, started: float) -> None:
        self.s = settings
        self.phase = "starting"
        self.deadline: float | None = started + settings.run_timeout_s
        self.compile_left = settings.compile_timeout_s
        self.active_since: float | None = None  # the build clock runs since
        self.call_s = CALL_MAX_S
        self.eager_ms: float | None = None
        self.turn_end: float | None = None

    def _pause_build(self, t: float) -> None:
        if self.active_since is not None:
            self.compile_left -= t - self.active_since
            self.active_since = None

    def _run_build(self, t: float) -> None:
        if self.active_since is None:
            self.active_since = t
        # From when the clock started: repeating the message cannot stretch the limit.
        self.deadline = self.active_since + self.compile_left

    def beat(self, t: float, allow_s: float | None = None) -> None:
        allow = min(float(allow_s or 0.0), CALL_MAX_S)
        self.deadline = min(t + max(self.call_s, allow), self.turn_end or float("inf"))

    def on_phase(self, phase: str, msg: dict, t: float) -> None:
        self.phase = phase
        if phase == "ready":
            self.eager_ms = msg.get("ref_eager_ms")
            self.call_s = call_limit(self.eager_ms)
            self.deadline = None  # waits for its candidate line
        elif phase in ("compiling", "building"):
            self._run_build(t)
        elif phase == "build_queue":
            self._pause_build(t)
            self.deadline = None  # the parent holds it until a slot frees
        elif phase in ("compiled", "waiting_gpu"):
            self._pause_build(t)
            self.deadline = None
        elif phase == "gpu":
            self.turn_end = t + self.s.run_timeout_s
            self.beat(t)
        elif phase in TURN_PHASES:
            self.beat(t)

    def timeout_error(self, now: float) -> str:
        if self.phase in ("starting", "preparing"):
            return (f"starting the worker and preparing the reference took longer than "
                    f"{self.s.run_timeout_s:.0f} s; the worker was killed")
        if self.phase in BUILD_PHASES:
            return (f"compiling took longer than {self.s.compile_timeout_s:.0f} s of build time; "
                    "the worker was killed")
        if self.turn_end is not None and now >= self.turn_end:
            return (f"the GPU turn took longer than {self.s.run_timeout_s:.0f} s; "
                    "the worker was killed")
        eager = f"{self.eager_ms:.3f} ms" if self.eager_ms is not None else "unknown"
        return (f"a call on the GPU ran longer than {self.call_s:.1f} s during {self.phase} "
                f"(the reference's eager call: {eager}); the worker was killed")


def follow(worker: Worker, settings: EvalSettings, slots: threading.Semaphore,
           cancelled: threading.Event, on_phase=None, since: float = 0.0,
           builder: Builder | None = None) -> dict:
    """Read the worker's messages until its result, enforcing each phase's limit; build what it
    asks for, one CPU slot per build, with `builder(spec, timeout_s, cancelled) -> key` (the
    clean builder; it raises RuntimeError with the compiler's message). Messages that arrived
    before `since` (a spare's warm-up) are not passed to `on_phase`."""
    watch = Watch(settings, worker.started)
    compiled: dict = {}
    forged = False
    while True:
        now = time.monotonic()
        wait = None if watch.deadline is None else max(0.0, watch.deadline - now)
        try:
            t, line = worker.messages.get(timeout=wait)
        except queue.Empty:
            worker.kill()
            return {**compiled, "status": "timeout", "error": watch.timeout_error(now)}
        if line is None:
            worker.proc.wait()
            return {**compiled, "status": "crashed", "error": None}
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            forged = True
            continue
        if not isinstance(msg, dict) or msg.get("nonce") != worker.nonce:
            forged = True
            continue
        kind = msg.get("type")
        if kind == "result":
            result = msg["verdict"]
            if forged:
                result.setdefault("flags", []).append({
                    "kind": "forged_result",
                    "reason": "something other than the evaluator wrote to its result channel"})
            return result
        if kind == "beat":
            watch.beat(t, msg.get("allow_s"))
            continue
        phase = str(msg.get("phase", watch.phase))
        watch.on_phase(phase, msg, t)
        if phase == "compiled":
            compiled = {k: msg[k] for k in ("compile_s", "cache_hit", "extensions",
                                            "cache_key") if k in msg}
        if on_phase and t >= since and phase not in QUIET_PHASES:
            on_phase(phase)
        if phase == "build_queue":
            reply = _build(worker, watch, msg.get("spec"), slots, cancelled, builder, on_phase)
            if reply is None:
                continue  # killed (cancelled, dead): its stream ends next
            if reply.get("timeout"):
                return {**compiled, "status": "timeout",
                        "error": watch.timeout_error(time.monotonic())}
            worker.send(reply)


def _build(worker: Worker, watch: Watch, spec, slots: threading.Semaphore,
           cancelled: threading.Event, builder: Builder | None, on_phase) -> dict | None:
    """One build request: wait for a CPU slot (not counted), build against the candidate's
    build clock, answer {"key"} or {"error"}; {"timeout"} or None once the worker is killed."""
    while not slots.acquire(timeout=0.25):
        if cancelled.is_set() or not worker.alive():
            worker.kill()
            return None
    try:
        now = time.monotonic()
        watch.on_phase("building", {}, now)
        if on_phase:
            on_phase("building")
        if builder is None:
            return {"error": "this verifier builds nothing (no builder)"}
        try:
            key = builder(spec, watch.deadline - now, cancelled)
            return {"key": key, "seconds": time.monotonic() - now}
        except BuildTimeout:
            worker.kill()
            return {"timeout": True}
        except BuildCancelled:
            worker.kill()
            return None
        except (RuntimeError, OSError) as e:
            return {"error": str(e) or type(e).__name__}
    finally:
        slots.release()
