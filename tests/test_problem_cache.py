"""A problem validated once is described from the cache next time, without importing torch."""
from __future__ import annotations

import json
import subprocess
import sys

from workbench import problem_cache
from workbench.problems import load_problem

PROBLEM = '''"""Doubles its input."""
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return []
'''
LOAD = ("import json, sys\nfrom workbench import problem_cache\n"
        "p = problem_cache.load(sys.argv[1], smoke=False)\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, **p.summary()}))\n")


def test_second_load_needs_no_torch_and_says_the_same(tmp_path, monkeypatch):
    path = tmp_path / "twice.py"
    path.write_text(PROBLEM)
    env = {"KERNEL_WORKBENCH_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", LOAD, str(path)], env=env,
                                      capture_output=True, text=True, check=True).stdout)
            for _ in range(2)]
    # Neither imports torch here: the first load runs the file in the problem loader's process
    # (workbench.problem_loader), the second reads the cache.
    assert runs[0].pop("torch") is False and runs[1].pop("torch") is False
    assert runs[0] == runs[1]
    monkeypatch.setenv("KERNEL_WORKBENCH_CACHE", str(tmp_path / "cache"))
    assert problem_cache.load(path, smoke=False) == load_problem(path, smoke=False)
    # Another source is another entry: an edited problem is validated again.
    path.write_text(PROBLEM.replace("x * 2", "x * 3"))
    assert len(list((tmp_path / "cache" / "problems").glob("*.json"))) == 1
    problem_cache.load(path, smoke=False)
    assert len(list((tmp_path / "cache" / "problems").glob("*.json"))) == 2
