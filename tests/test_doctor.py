"""doctor: toolkit detection through an nvcc link, key privacy, and the no-GPU report."""
from __future__ import annotations

import os
import stat

from click.testing import CliRunner

from workbench import cuda_env
from workbench.cli import main


def _fake_toolkit(root):
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


def test_cuda_home_follows_an_nvcc_link(tmp_path, monkeypatch):
    nvcc = _fake_toolkit(tmp_path / "cuda-13.0")
    links = tmp_path / "local" / "bin"
    links.mkdir(parents=True)
    (links / "nvcc").symlink_to(nvcc)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{links}{os.pathsep}{os.environ['PATH']}")
    # torch would guess tmp/local (where the link sits); the real root is the toolkit's.
    assert cuda_env.find_cuda_home() == tmp_path / "cuda-13.0"
    assert cuda_env.build_env([])["CUDA_HOME"] == str(tmp_path / "cuda-13.0")


def test_doctor_reports_keys_without_values(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    result = CliRunner().invoke(main, ["doctor"])
    assert "sk-very-secret-value" not in result.output
    lines = {line[7:].split()[0]: line for line in result.output.splitlines() if line.startswith("[")}
    assert lines["OPENAI_API_KEY"].rstrip().endswith("set")
    assert "not set" in lines["GEMINI_API_KEY"]
    for name in ("python", "torch", "nvcc", "CUDA_HOME", "ninja"):
        assert name in lines


def test_doctor_says_when_there_is_no_gpu(monkeypatch):
    monkeypatch.setattr(cuda_env, "list_gpus", lambda: [])
    result = CliRunner().invoke(main, ["doctor"])
    assert "no GPU found" in result.output
    failures = [line for line in result.output.splitlines() if line.startswith("[FAIL]")]
    assert (result.exit_code == 1) == bool(failures)
    for line in failures:
        fix = result.output.splitlines()[result.output.splitlines().index(line) + 1]
        assert fix.strip().startswith("fix: ")
