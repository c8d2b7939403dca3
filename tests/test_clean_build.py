"""Builds happen in a clean builder process that runs no candidate code, under the key the parent
computes from the load_inline arguments (workbench.gpu.clean_build): nothing a worker does with
its own files, or claims about a key, decides what the shared cache holds."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest

from workbench.gpu import buildhook, clean_build, sandbox
from workbench.gpu.executor import EvalRequest, EvalSettings

from sandbox_support import PYTHONPATH, source

MISSING = sandbox.support().missing
PROBLEM = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x
    def get_inputs():
        return [torch.randn(8)]
    def get_init_inputs():
        return []
""")


def _spec(**overrides) -> dict:
    code = ("import json; from workbench.gpu import buildhook; "
            "print(json.dumps(buildhook.spec_of('t', 'int f(int x) { return x; }', "
            "functions=['f'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin"}, timeout=120)
    return {**json.loads(out.stdout.splitlines()[-1]), **overrides}


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
    with pytest.raises(RuntimeError, match="malformed"):
        clean_build.build(bad, tmp_path, {}, 10, threading.Event())
    assert not (tmp_path / "jobs").exists()


@pytest.mark.skipif(bool(MISSING), reason=f"this kernel lacks {MISSING}")
def test_a_candidate_cannot_swap_its_build_before_it_is_cached(tmp_path):
    from workbench.gpu.pool import LocalPool

    pool = LocalPool(gpus=[], cache_dir=tmp_path / "cache", spares=False)
    try:
        v = pool.evaluate(EvalRequest("p", PROBLEM, source("hostile_swap_build"), 1e-4, 1e-4,
                                      None, 0, settings=EvalSettings(no_gpu=True),
                                      label="hostile"))
    finally:
        pool.shutdown()
    assert v["status"] != "compile_error", v.get("error")
    assert "HOSTILE built" in v["build_log"]
    (so,) = (tmp_path / "cache" / "ext").glob("*/*/swap_ext_*.so")
    data = so.read_bytes()
    assert data.startswith(b"\x7fELF") and b"HOSTILE" not in data and len(data) > 10_000
    assert so.parent.name == v["cache_key"]   # the parent's key, from the call's arguments
