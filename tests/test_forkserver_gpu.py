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
