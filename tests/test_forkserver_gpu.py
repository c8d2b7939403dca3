"""Workers forked by the fork server on a real GPU: CUDA, the reference's torch.compile and the
timing work in a forked worker as in a plain one. Run on the GPU box: `pytest -m gpu`."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.gpu.executor import EvalSettings
from workbench.gpu.forkserver import ForkedProcess
from workbench.gpu.verifier import request_for
from workbench.problems import load_problem

from sandbox_support import FORK_SKIP, forkserver_ok, start_fork_server
from test_pool_workers import record_launches

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not forkserver_ok(), reason="no fork server: " + FORK_SKIP)]
HERE = Path(__file__).parent / "candidates"


def test_forked_workers_verify_honest_kernels(tmp_path):
    from workbench.gpu.pool import LocalPool

    pool = LocalPool(cache_dir=tmp_path, spares=False, fork_server=True)
    workers = record_launches(pool)
    try:
        start_fork_server(pool)
        futures = {name: pool.submit(request_for(load_problem(name.split("_")[0], smoke=False),
                                                 (HERE / f"{name}.py").read_text(),
                                                 EvalSettings(), label=name))
                   for name in ("silu_honest", "softmax_honest")}
        verdicts = {name: f.result() for name, f in futures.items()}
    finally:
        pool.shutdown()
    assert [type(w.proc) for w in workers] == [ForkedProcess, ForkedProcess]
    for name, v in verdicts.items():
        assert v["status"] == "correct", (name, v.get("error"), v.get("flags"))
        assert v.get("compile_reference_error") is None, v["compile_reference_error"]
        assert v["speedup_compile"] is not None and v["speedup_eager"] is not None


@pytest.mark.parametrize("forked", [False, True], ids=["plain", "forked"])
def test_a_worker_started_from_a_kept_compile_cache_times_torch_compile(tmp_path, forked):
    """The first worker of a problem keeps its compile cache (its job directory is gone once it
    ends); the next one starts from a copy. A verdict from the daemon once came back without
    the torch.compile baseline: PermissionError on a job directory not the worker's own."""
    from workbench.gpu import reference_cache
    from workbench.gpu.pool import LocalPool

    pool = LocalPool(cache_dir=tmp_path, spares=False, fork_server=forked)
    workers = record_launches(pool)
    problem = load_problem("silu", smoke=False)
    source = (HERE / "silu_honest.py").read_text()
    try:
        if forked:
            start_fork_server(pool)
        first = pool.submit(request_for(problem, source, EvalSettings(), label="first")).result()
        job, _ = pool._job(request_for(problem, source, EvalSettings()), 0)
        assert reference_cache.kept(tmp_path, reference_cache.key(job))
        second = pool.submit(request_for(problem, source, EvalSettings(), label="second")).result()
    finally:
        pool.shutdown()
    assert [type(w.proc) is ForkedProcess for w in workers] == [forked, forked]
    for v in (first, second):
        assert v["status"] == "correct", (v.get("error"), v.get("flags"))
        assert v.get("compile_reference_error") is None, v["compile_reference_error"]
        assert v["speedup_compile"] is not None
