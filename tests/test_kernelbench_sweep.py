"""bench/kernelbench_sweep.py's loading pass (the part that runs without a GPU)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOOD = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x.relu()\n\n"
        "def get_inputs():\n    return [torch.randn(4, 4)]\n\ndef get_init_inputs():\n    return []\n")


def test_load_only_lists_exceptions_with_reasons(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level2").mkdir()
    (tmp_path / "level1" / "1_Relu.py").write_text(GOOD)
    (tmp_path / "level1" / "2_Needs.py").write_text("import not_a_package_here\n" + GOOD)
    (tmp_path / "level2" / "10_Relu.py").write_text(GOOD)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "kernelbench_sweep.py"),
                           str(tmp_path), "--load-only"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "3 files, 2 loaded" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| level")]
    assert rows == [rows[0]] and "level1/2_Needs" in rows[0] and "not_a_package_here" in rows[0]


def test_empty_directory_is_one_clear_line(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "kernelbench_sweep.py"),
                           str(tmp_path), "--load-only"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "no level1-3 problem files" in proc.stderr


def test_reference_copy_is_judged_with_the_verifiers_check(tmp_path, monkeypatch):
    """The GPU pass, run on the CPU (no profile): the reference's copy of a problem whose
    output is constant, and of one with triangular inputs, passes."""
    import importlib.util

    from workbench.gpu import inputs as inp
    from workbench.problems import load_problem

    monkeypatch.setattr(inp, "DEVICE", inp.DEVICE)  # the sweep sets it; restored after
    spec = importlib.util.spec_from_file_location("kb_sweep", ROOT / "bench" / "kernelbench_sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    structured = ROOT / "tests" / "candidates" / "structured"
    for name in ("const_offset_problem", "triu_matmul_problem"):
        text = (structured / f"{name}.py").read_text().replace("N = 1024", "N = 128") \
            .replace("BATCH = 256", "BATCH = 32")
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        row = sweep.judge_reference(path, load_problem(path, smoke=False), trials=3, device="cpu")
        assert row["status"] == "correct" and row["trials"] == 3 and row["reason"] is None, row
