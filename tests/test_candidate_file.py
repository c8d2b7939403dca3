"""Candidates are imported from a real file (Triton's @jit reads its source through inspect)."""
from __future__ import annotations

import inspect
import os
import sys

from workbench.gpu import candidate_file


def test_candidate_functions_have_readable_source(tmp_path, monkeypatch):
    monkeypatch.setenv(candidate_file.BUILD_ENV, str(tmp_path / "build"))
    source = "def add_kernel(x, y):\n    return x + y\n\nclass ModelNew:\n    pass\n"
    try:
        module = candidate_file.import_source(source, "kwb_test_candidate")
        assert inspect.getsource(module.add_kernel).startswith("def add_kernel")
        assert module.__file__ == str(tmp_path / "candidate" / "kwb_test_candidate.py")
    finally:
        sys.modules.pop("kwb_test_candidate", None)


def test_without_a_sandbox_the_file_goes_to_a_temporary_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(candidate_file.BUILD_ENV, raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", "set")
    monkeypatch.delenv("TRITON_CACHE_DIR")  # restored (unset) after the test
    try:
        module = candidate_file.import_source("VALUE = 3\n", "kwb_test_candidate2")
        assert module.VALUE == 3 and "kwb-candidate-" in module.__file__
    finally:
        sys.modules.pop("kwb_test_candidate2", None)
    candidate_file.triton_cache_default(tmp_path)
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
