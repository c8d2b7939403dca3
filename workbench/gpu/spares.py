"""Warm spare workers: start-up off the critical path, isolation kept.

Per GPU and per job (problem + settings), one spare worker waits that has already imported
torch, created its CUDA context and prepared the reference (eager and torch.compile). A
candidate takes it (or a fresh worker when none waits), uses it alone, and it is killed after;
taking one starts the next. A spare that dies while it waits is replaced, up to a few times in a
row (a problem that kills every worker must not respawn forever).
"""
from __future__ import annotations

import threading
from typing import Callable

from workbench.gpu.workers import Worker

MAX_DEATHS = 3      # consecutive deaths of waiting spares before that slot gets no more
KEYS_PER_GPU = 2    # problems/settings kept warm per GPU; the oldest spare goes first
LAST_LINES = 20     # of a dead spare's log, kept to say why it died


class Spares:
    def __init__(self, launch: Callable[[dict, int | None, str], Worker],
                 enabled: bool = True) -> None:
        self._launch = launch
        self.enabled = enabled
        self._lock = threading.Lock()
        self._waiting: dict[tuple, Worker] = {}  # (gpu, key) -> spare; insertion order = age
        self._deaths: dict[tuple, int] = {}
        self._last_words: dict[tuple, str] = {}  # the end of the last dead spare's log, per slot
        self._closed = False

    def take(self, gpu: int | None, key: str, job: dict) -> Worker:
        """The worker for one candidate: the waiting spare if it lives, else a fresh one."""
        slot = (gpu, key)
        with self._lock:
            if self._closed:
                raise RuntimeError("the executor is shut down")
            spare = self._waiting.pop(slot, None)
        if spare is not None and not spare.alive():
            spare.finish()
            spare = None
        elif spare is not None:
            with self._lock:
                self._deaths.pop(slot, None)
        worker = spare or self._launch(job, gpu, key)
        self.ensure(gpu, key, job)
        return worker

    def ensure(self, gpu: int | None, key: str, job: dict) -> None:
        """Start a spare for this GPU and job unless one waits (or they keep dying)."""
        slot = (gpu, key)
        with self._lock:
            if (not self.enabled or self._closed or slot in self._waiting
                    or self._deaths.get(slot, 0) >= MAX_DEATHS):
                return
        try:
            spare = self._launch(job, gpu, key)
        except Exception:  # noqa: BLE001 - a spare is a head start, never a candidate's failure
            return
        evicted = []
        with self._lock:
            if self._closed or slot in self._waiting:
                evicted.append(spare)
            else:
                self._waiting[slot] = spare
                same_gpu = [s for s in self._waiting if s[0] == gpu]
                for old in same_gpu[:max(0, len(same_gpu) - KEYS_PER_GPU)]:
                    evicted.append(self._waiting.pop(old))
                threading.Thread(target=self._watch, args=(slot, spare, job), daemon=True,
                                 name="kwb-spare").start()
        for worker in evicted:
            worker.finish()

    def _watch(self, slot: tuple, spare: Worker, job: dict) -> None:
        spare.proc.wait()
        with self._lock:
            if self._waiting.get(slot) is not spare:
                return  # taken (or evicted): not a death while waiting
            del self._waiting[slot]
            self._deaths[slot] = self._deaths.get(slot, 0) + 1
        words = spare.finish().strip().splitlines()[-LAST_LINES:]
        with self._lock:
            self._last_words[slot] = "\n".join(words)
        self.ensure(slot[0], slot[1], job)

    def deaths(self) -> list[dict]:
        """Slots whose spares died while waiting: how many in a row, and the last one's log tail
        (why every verdict there pays a cold start)."""
        with self._lock:
            return [{"gpu": gpu, "key": key, "deaths": n, "log": self._last_words.get((gpu, key), "")}
                    for (gpu, key), n in self._deaths.items()]

    def waiting(self) -> list[Worker]:
        with self._lock:
            return list(self._waiting.values())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares, self._waiting = list(self._waiting.values()), {}
        for spare in spares:
            spare.finish()
