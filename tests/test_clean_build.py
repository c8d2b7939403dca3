"""Builds happen in a clean builder process that runs no candidate code, under the key the parent
computes from the load_inline arguments (workbench.gpu.clean_build): nothing a worker does with
its own files, or claims about a key, decides what the shared cache holds."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from workbench import cuda_env
from workbench.gpu import buildhook, clean_build, sandbox

from sandbox_support import PYTHONPATH, hostile_request, left_in, source
from test_pool_workers import wait_for

MISSING = sandbox.support().missing


def _spec(**overrides) -> dict:
    return {**buildhook.spec_of("t", "int f(int x) { return x; }", functions=["f"]), **overrides}


def _builder(request: dict, tmp_path) -> dict:
    """The builder process itself, unsandboxed, fed one request."""
    out = subprocess.run([sys.executable, "-m", "workbench.gpu.builder"], input=json.dumps(request),
                         capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin",
                              buildhook.BUILD_ENV: str(tmp_path)})
    return clean_build._answer(out.stdout)


def test_the_builder_refuses_a_key_that_is_not_its_arguments(tmp_path):
    spec = _spec()
    answer = _builder({"spec": spec, "key": "c0ffee" * 10 + "beef"}, tmp_path)
    assert answer == {clean_build.TAG: True,
                      "error": "the build request's key does not match its arguments"}
    assert list(tmp_path.iterdir()) == []


def test_the_builder_refuses_another_toolchain(tmp_path):
    spec = _spec(toolchain="0.0|12.0|9.0|(3, 9)")
    answer = _builder({"spec": spec, "key": buildhook.build_key(spec)}, tmp_path)
    assert "this builder has" in answer["error"] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", [None, [], {"record": {}}, {"record": {"name": "x"}},
                                 {"toolchain": "t", "record": {"name": "x", "cpp_sources": [1]}}])
def test_a_malformed_request_starts_no_process(tmp_path, bad):
    with ThreadPoolExecutor(1) as launcher:
        builders = clean_build.Builders(tmp_path, {}, launcher, spares=1)
        with pytest.raises(RuntimeError, match="malformed"):
            builders.build(bad, 10, threading.Event())
        assert not (tmp_path / "jobs").exists() and builders.waiting() == []


@pytest.mark.skipif(bool(MISSING), reason=f"this kernel lacks {MISSING}")
def test_a_candidate_cannot_swap_its_build_before_it_is_cached(tmp_path):
    from workbench.gpu.pool import LocalPool

    pool = LocalPool(gpus=[], cache_dir=tmp_path / "cache", spares=False)
    try:
        v = pool.evaluate(hostile_request(source("hostile_swap_build")))
    finally:
        pool.shutdown()
    assert v["status"] != "compile_error", v.get("error")
    assert "HOSTILE built" in v["build_log"]
    (so,) = (tmp_path / "cache" / "ext").glob("*/*/swap_ext_*.so")
    data = so.read_bytes()
    assert data.startswith(b"\x7fELF") and b"HOSTILE" not in data and len(data) > 10_000
    assert so.parent.name == v["cache_key"]   # the parent's key, from the call's arguments


@pytest.mark.skipif(bool(MISSING), reason=f"this kernel lacks {MISSING}")
def test_a_build_takes_a_waiting_builder_and_close_leaves_nothing(tmp_path, monkeypatch):
    base = cuda_env.build_env([])
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", base["TORCH_CUDA_ARCH_LIST"])  # as in its env
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(1, thread_name_prefix="kwb-launch") as launcher:
        builders = clean_build.Builders(cache, base, launcher, spares=1)
        builders.ensure()
        assert wait_for(lambda: builders.waiting())
        (first,) = builders.waiting()
        spec = _spec()
        key = builders.build(spec, 300, threading.Event())
        assert first.poll() is not None                       # it built, and is gone
        assert wait_for(lambda: builders.waiting())           # the next one waits
        (so,) = (cache / "ext" / key[:2] / key).glob("t_*.so")
        assert so.read_bytes().startswith(b"\x7fELF") and key == buildhook.build_key(spec)
        assert builders.build(spec, 300, threading.Event()) == key   # a hit: no builder taken
        (second,) = builders.waiting()
        builders.close()
        assert second.poll() is not None and builders.waiting() == []
    assert list((cache / "jobs").iterdir()) == [] and left_in(cache) == []
