"""Issue 12, item 4: two kernels with the same source (one build key, one build lock) must not
both time out because one waited for the other's lock. The waiting is not the waiter's build."""
from __future__ import annotations

from test_pool_workers import HONEST, fake_build, request, sleeping_builder
from workbench.gpu.pool import LocalPool


def test_same_source_builds_wait_for_the_lock_outside_their_limit(tmp_path):
    pool = LocalPool(gpus=[], cache_dir=tmp_path / "cache", build_slots=2,
                     builder=sleeping_builder(tmp_path / "cache", 3))
    try:
        pool.prewarm(request(HONEST, no_gpu=True))
        same = fake_build("same source")
        futures = [pool.submit(request(same, label=f"k{i}", no_gpu=True, compile_timeout_s=5))
                   for i in range(2)]
        verdicts = [f.result() for f in futures]
    finally:
        pool.shutdown(cancel=True)
    assert [v["status"] for v in verdicts] != ["timeout", "timeout"]
    assert all(v["status"] != "timeout" for v in verdicts), [v["error"] for v in verdicts]
