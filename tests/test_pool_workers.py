"""The pool's worker life cycle with real worker processes and a simulated GPU turn (no CUDA):
warm spares, the adaptive watchdog, build slots and several GPUs."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from workbench.gpu import buildhook, reference_cache
from workbench.gpu.clean_build import BuildCancelled, BuildTimeout
from workbench.gpu.executor import EvalRequest, EvalSettings
from workbench.gpu.pool import LocalPool
from workbench.gpu.simulated import TOY_CANDIDATE as HONEST
from workbench.gpu.simulated import TOY_PROBLEM as PROBLEM
from workbench.gpu.spares import MAX_DEATHS

# Fails to import in a process where any candidate was imported before.
FRESH = ("import torch\nassert not hasattr(torch, '_kwb_seen'), 'this worker ran a candidate before'\n"
         "torch._kwb_seen = True\n" + HONEST)


def record_launches(pool: LocalPool) -> list:
    """Every worker the pool starts from now on (spares included)."""
    launched, start = [], pool._start

    def recording(*args):
        worker = start(*args)
        launched.append(worker)
        return worker

    pool._start = recording
    return launched


def fake_build(tag: str) -> str:
    """A candidate whose load_inline misses the cache (a key of its own) and goes to the pool's
    builder; it does not import what was built (the sleeping builder below writes no real .so)."""
    return (f"import types\nimport torch.utils.cpp_extension as ce\n"
            f"ce._import_module_from_library = lambda *a, **k: types.SimpleNamespace()\n"
            f"ext = ce.load_inline(name='x', cpp_sources='// {tag}', extra_cflags=['-DX'])\n"
            + HONEST)


def sleeping_builder(cache_dir: Path, seconds: float):
    """A pool builder whose build is `seconds` of sleep instead of nvcc: the build queue, the
    CPU slots and the limits are the real ones."""
    def build(spec: dict, timeout_s: float, cancelled) -> str:
        if cancelled.wait(min(seconds, max(0.0, timeout_s))):
            raise BuildCancelled()
        if seconds > timeout_s:
            raise BuildTimeout()
        key = buildhook.build_key(spec)
        folder = cache_dir / "ext" / key[:2] / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{buildhook.ext_name(spec, key)}.so").write_bytes(b"")
        return key
    return build


def request(source: str, label: str = "k", **settings) -> EvalRequest:
    return EvalRequest("twice", PROBLEM, source, 1e-4, 1e-4, None, 0,
                       settings=EvalSettings(**settings), label=label)


def wait_for(predicate, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setenv("KERNEL_WORKBENCH_SIMULATED_GPU", "0.3")


@pytest.fixture
def pool(tmp_path, simulated):
    p = LocalPool(gpus=[0], cache_dir=tmp_path / "cache")
    yield p
    p.shutdown(cancel=True)


def test_each_candidate_gets_a_fresh_warm_worker(pool):
    launched = record_launches(pool)
    first = pool.submit(request(FRESH)).result()
    assert first["status"] == "flagged" and first["gpu"] == "simulated 0", first["error"]
    assert wait_for(lambda: any(w.ready.is_set() for w in pool.spares.waiting()))
    (spare,) = pool.spares.waiting()
    second = pool.submit(request(FRESH)).result()
    assert second["status"] == "flagged", second["error"]
    # The second candidate ran in the spare that waited; it and the first's worker are dead,
    # and the one left waiting is new.
    (replacement,) = pool.spares.waiting()
    assert replacement is not spare and replacement.alive()
    assert spare in launched and all(not w.alive() for w in launched if w is not replacement)


# The problem writes into the reference's compile cache while it loads, as torch.compile of the
# reference does; the candidate writes there too, after it was handed over.
WRITE_CACHE = ("import os, pathlib\n_d = pathlib.Path(os.environ['TORCHINDUCTOR_CACHE_DIR'])\n"
               "_d.mkdir(parents=True, exist_ok=True)\n(_d / '{name}').write_text('{name}')\n")


def cache_writing_request() -> EvalRequest:
    req = request(WRITE_CACHE.format(name="poison") + HONEST)
    req.problem_source = WRITE_CACHE.format(name="compiled") + PROBLEM
    return req


def record_plants(monkeypatch) -> list:
    """Whether each worker started from now on got a kept reference cache."""
    planted, plant = [], reference_cache.plant
    monkeypatch.setattr(reference_cache, "plant", lambda *a: planted.append(plant(*a)) or planted[-1])
    return planted


def kept_files(cache_dir) -> list[str]:
    return sorted(f.name for f in (cache_dir / "reference").rglob("*") if f.is_file())


def test_reference_cache_comes_only_from_workers_no_candidate_touched(pool, monkeypatch):
    planted = record_plants(monkeypatch)
    req = cache_writing_request()
    # A fresh worker gets its candidate before it is ready: never kept. Its spare is kept.
    assert pool.submit(req).result()["status"] == "flagged"
    assert wait_for(lambda: any(w.ready.is_set() for w in pool.spares.waiting()))
    assert kept_files(pool.cache_dir) == ["compiled"]
    # The next candidate takes that spare; the spare started after it gets a copy.
    assert pool.submit(req).result()["status"] == "flagged"
    assert planted[:2] == [False, False] and planted[-1] is True, planted


def test_caches_kept_by_older_code_are_not_planted(tmp_path):
    """Kept before workers compiled without inductor's local autotune cache, a cache holds
    autotuners that write to their own worker's directory: a new key leaves it unused."""
    import hashlib
    import json

    job = {"problem_source": PROBLEM, "dtype": "float32", "settings": {"trials": 5}}
    before = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()  # format 1
    (tmp_path / "job" / "tmp" / "inductor").mkdir(parents=True)
    (tmp_path / "job" / "tmp" / "inductor" / "entry").write_text("x")
    assert reference_cache.keep(tmp_path, before, tmp_path / "job")
    assert reference_cache.kept(tmp_path, before)
    assert not reference_cache.kept(tmp_path, reference_cache.key(job))
    assert not reference_cache.plant(tmp_path, reference_cache.key(job), tmp_path / "new")


def test_a_pool_without_spares_keeps_the_reference_cache_of_its_first_worker(
        tmp_path, simulated, monkeypatch):
    # A one-off `eval` has no spare: its first worker gets the candidate only once ready, so
    # the next `eval` of the problem starts its reference compile from the kept cache.
    planted = record_plants(monkeypatch)
    p = LocalPool(gpus=[0], cache_dir=tmp_path / "cache", spares=False)
    try:
        req = cache_writing_request()
        assert p.submit(req).result()["status"] == "flagged"
        assert kept_files(p.cache_dir) == ["compiled"]
        assert p.submit(req).result()["status"] == "flagged"
        assert planted == [False, True]
    finally:
        p.shutdown(cancel=True)


def test_reference_cache_copies_regular_files_once(tmp_path, monkeypatch):
    job, cache = tmp_path / "job", tmp_path / "cache"
    (job / "tmp" / "inductor" / "fx").mkdir(parents=True)
    (job / "tmp" / "inductor" / "fx" / "graph").write_text("g")
    (job / "tmp" / "triton").mkdir()
    (job / "tmp" / "triton" / "k.cubin").write_text("c")
    (job / "tmp" / "inductor" / "link").symlink_to("/etc/passwd")
    assert reference_cache.keep(cache, "ab" * 32, job)
    (job / "tmp" / "inductor" / "fx" / "graph").write_text("changed later")
    assert not reference_cache.keep(cache, "ab" * 32, job)   # the first copy stays
    new = tmp_path / "new"
    assert reference_cache.plant(cache, "ab" * 32, new)
    assert (new / "tmp" / "inductor" / "fx" / "graph").read_text() == "g"
    assert (new / "tmp" / "triton" / "k.cubin").read_text() == "c"
    assert not (new / "tmp" / "inductor" / "link").exists()
    assert not reference_cache.plant(cache, "cd" * 32, new)
    monkeypatch.setattr(reference_cache, "MAX_BYTES", 1)
    assert not reference_cache.keep(cache, "cd" * 32, job)


@pytest.mark.parametrize("handed_first", [False, True])
def test_ready_hook_runs_only_before_any_candidate(handed_first, tmp_path):
    import os
    import subprocess
    import tempfile

    from workbench.gpu.workers import Worker

    calls = []
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            start_new_session=True)  # as the pool starts workers
    read_fd, write_fd = os.pipe()
    worker = Worker(proc, read_fd, "n", tempfile.TemporaryFile(mode="w+"), 0, "k",
                    on_ready=lambda: calls.append("kept"))
    if handed_first:
        assert worker.hand_over({"candidate_source": "x"})
    os.write(write_fd, b'{"type": "phase", "phase": "ready"}\n')
    assert worker.ready.wait(10)
    assert calls == ([] if handed_first else ["kept"])
    os.close(write_fd)
    worker.finish()


def test_a_spare_that_dies_is_replaced(pool):
    pool.prewarm(request(HONEST))
    (spare,) = pool.spares.waiting()
    spare.kill()
    assert wait_for(lambda: [w for w in pool.spares.waiting() if w is not spare])
    (replacement,) = pool.spares.waiting()
    assert replacement.alive() and replacement.proc.pid != spare.proc.pid


def test_spares_stop_after_repeated_deaths(tmp_path, simulated):
    pool = LocalPool(gpus=[0], cache_dir=tmp_path / "cache")
    try:
        # A reference that cannot be built kills every worker during its preparation.
        broken = request(HONEST)
        broken.problem_source = PROBLEM.replace("return []", "raise RuntimeError('no model')")
        launched = record_launches(pool)
        pool.prewarm(broken)
        assert wait_for(lambda: len(launched) == MAX_DEATHS and not pool.spares.waiting(),
                        timeout=180)
        time.sleep(2)
        assert len(launched) == MAX_DEATHS and not pool.spares.waiting()
        (died,) = pool.spares.deaths()
        assert died["deaths"] == MAX_DEATHS and "no model" in died["log"]
        verdict = pool.submit(broken).result()
        assert verdict["status"] == "crashed" and "no model" in verdict["error"]
    finally:
        pool.shutdown(cancel=True)


def test_cancel_kills_workers_and_spares(pool):
    launched = record_launches(pool)
    compiling = []
    pool.on_phase = lambda label, phase: phase == "compiling" and compiling.append(label)
    hang = "import time\ntime.sleep(600)\n" + HONEST
    futures = [pool.submit(request(hang, compile_timeout_s=600)) for _ in range(2)]
    assert wait_for(lambda: len(compiling) == 2, timeout=120)
    assert pool.spares.waiting()
    pool.shutdown(cancel=True)
    for f in futures:  # cancelled work ends (its verdict, if any, is not the point here)
        f.exception(timeout=30)
    assert len(launched) >= 3
    for worker in launched:
        assert wait_for(lambda: not worker.alive(), timeout=10)


def test_hang_on_the_gpu_is_killed_and_the_gpu_released(pool):
    hang = HONEST.replace("return x * 2", "while True:\n            pass")
    pool.prewarm(request(HONEST))
    started = {}
    pool.on_phase = lambda label, phase: started.setdefault((label, phase), time.monotonic())
    stuck = pool.submit(request(hang, label="hang"))
    honest = pool.submit(request(HONEST, label="honest"))
    verdict = stuck.result()
    ended = time.monotonic()
    assert verdict["status"] == "timeout" and "ran longer than 2.0 s" in verdict["error"]
    # Killed within the adaptive limit (2 s here: the reference takes microseconds), far
    # short of run_timeout_s.
    assert ended - started[("hang", "gpu")] < 6
    assert honest.result(timeout=120)["status"] == "flagged"


def test_build_limit_counts_only_its_own_build(tmp_path):
    """Three 3 s builds through one CPU slot take 9 s; each is within its 5 s limit."""
    pool = LocalPool(gpus=[], cache_dir=tmp_path / "cache", build_slots=1,
                     builder=sleeping_builder(tmp_path / "cache", 3))
    try:
        pool.prewarm(request(HONEST, no_gpu=True))
        futures = [pool.submit(request(fake_build(f"k{i}"), no_gpu=True,
                                       compile_timeout_s=5)) for i in range(3)]
        verdicts = [f.result() for f in futures]
    finally:
        pool.shutdown(cancel=True)
    assert [v["status"] for v in verdicts] == ["flagged"] * 3, [v["error"] for v in verdicts]
    assert all(3 <= v["compile_s"] < 5 for v in verdicts)


def test_several_gpus_take_turns_in_parallel(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_WORKBENCH_SIMULATED_GPU", "4")
    pool = LocalPool(gpus=[0, 1, 2], cache_dir=tmp_path / "cache", spares=False)
    assert pool.verify_workers >= 6
    try:
        verdicts = [f.result() for f in [pool.submit(request(HONEST)) for _ in range(6)]]
    finally:
        pool.shutdown(cancel=True)
    turns: dict[str, list] = {}
    for v in verdicts:
        turns.setdefault(v["gpu"], []).append(v["turn"])
    assert sorted(len(t) for t in turns.values()) == [2, 2, 2]
    for spans in turns.values():  # one turn at a time on each GPU
        (a0, a1), (b0, b1) = sorted(spans)
        assert a1 <= b0
    # Nothing in the parent serialises across GPUs: turns on different GPUs overlap.
    spans = sorted(s for t in turns.values() for s in t)
    assert any(b0 < a1 for (a0, a1), (b0, b1) in zip(spans, spans[1:]))


def test_width_limits_work_in_flight_in_arrival_order():
    import threading

    from workbench.gpu.pool import Width

    width, order, inside, peak = Width(2), [], [0], [0]
    lock = threading.Lock()
    release = threading.Event()

    def job(i: int) -> None:
        with width:
            with lock:
                order.append(i)
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            release.wait()
            with lock:
                inside[0] -= 1

    threads = []
    for i in range(6):
        threads.append(threading.Thread(target=job, args=(i,)))
        threads[-1].start()
        time.sleep(0.05)  # arrive in order
    assert wait_for(lambda: len(order) == 2, 5) and not wait_for(lambda: len(order) > 2, 0.5)
    width.set(4)  # wider while work waits: two more start at once
    assert wait_for(lambda: len(order) == 4, 5)
    release.set()
    for t in threads:
        t.join(10)
    assert order == list(range(6)) and peak[0] == 4


def test_requests_set_the_pool_width(tmp_path):
    pool = LocalPool(gpus=[], cache_dir=tmp_path / "cache", spares=False, verify_workers=3)
    try:
        assert pool.verify_workers == 3
        pool.submit(request(HONEST, no_gpu=True, verify_workers=5)).result()
        assert pool.verify_workers == 5
    finally:
        pool.shutdown()


# ---- the watchdog's arithmetic (no processes) ------------------------------------------------

def test_call_limit_scales_with_the_reference_within_bounds():
    from workbench.gpu.watchdog import call_limit

    assert call_limit(0.05) == 2.0          # a fast op: the 2 s floor
    assert call_limit(50.0) == 5.0          # 100x a 50 ms reference
    assert call_limit(1000.0) == 12.0       # a slow one is still killed well within 15 s
    assert call_limit(None) == 12.0


def test_build_clock_pauses_in_the_queue_and_cannot_be_stretched():
    from workbench.gpu.watchdog import Watch

    w = Watch(EvalSettings(compile_timeout_s=10), started=0.0)
    w.on_phase("ready", {"ref_eager_ms": 0.1}, 1.0)
    assert w.deadline is None
    w.on_phase("compiling", {}, 2.0)
    assert w.deadline == 12.0
    w.on_phase("build_queue", {}, 5.0)     # 3 s used; waiting for a slot costs nothing
    assert w.deadline is None
    w.on_phase("building", {}, 100.0)
    assert w.deadline == 107.0
    w.on_phase("building", {}, 104.0)      # said again: the limit does not move
    assert w.deadline == 107.0
    w.on_phase("compiled", {}, 106.0)
    assert w.deadline is None


def test_gpu_turn_deadline_follows_beats_up_to_the_turn_cap():
    from workbench.gpu.watchdog import Watch

    w = Watch(EvalSettings(run_timeout_s=30), started=0.0)
    w.on_phase("ready", {"ref_eager_ms": 0.1}, 1.0)
    w.on_phase("gpu", {}, 10.0)
    assert w.deadline == 12.0 and w.turn_end == 40.0
    w.beat(11.5)
    assert w.deadline == 13.5
    w.beat(12.0, allow_s=60)               # a longer allowance is capped at 12 s
    assert w.deadline == 24.0
    w.beat(39.0)
    assert w.deadline == 40.0              # never past the turn's cap
    assert "ran longer than 2.0 s" in w.timeout_error(20.0)
    assert "GPU turn took longer than 30 s" in w.timeout_error(40.0)
