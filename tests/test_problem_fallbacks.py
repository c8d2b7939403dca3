"""Any problem KernelBench can build, we can load: constructors that need real values, recurrent
layers (shapes without unrolling), missing packages, and the INPUT_VARIANTS declaration."""
from __future__ import annotations

import time

import pytest
import torch

from workbench.problems import ProblemError, load_problem

ITEM_IN_INIT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, depth):
        super().__init__()
        rates = [r.item() for r in torch.linspace(0, 0.1, depth)]  # Swin's drop-path schedule
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in rates)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x

def get_inputs():
    return [torch.randn(8, 64)]

def get_init_inputs():
    return [3]
'''


def _write(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def test_constructor_that_needs_real_values_loads(tmp_path):
    p = load_problem(_write(tmp_path, "swin_like", ITEM_IN_INIT), smoke=False)
    assert p.output_shapes == [(8, 64)]
    assert p.flops == 3 * 2 * 8 * 64 * 64
    # Inputs read once and outputs written once: weights are not bytes that must move.
    assert p.min_bytes == 2 * 8 * 64 * 4


RECURRENT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}(32, 48, num_layers=3, batch_first={bf}, bidirectional={bi})

    def forward(self, x, h0):
        out, state = self.rnn(x, h0)
        flat = [out] + (list(state) if isinstance(state, tuple) else [state])
        return [t.sum(-1) for t in flat]

def get_inputs():
    x = torch.randn({xs})
    h = torch.randn({hs})
    return [x, (h, h.clone()) if "{cls}" == "LSTM" else h]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first,bidirectional", [(True, True), (False, False)])
def test_recurrent_shapes_match_a_real_run(tmp_path, cls, batch_first, bidirectional):
    d = 2 if bidirectional else 1
    xs = "4, 512, 32" if batch_first else "512, 4, 32"
    text = RECURRENT.format(cls=cls, bf=batch_first, bi=bidirectional, xs=xs, hs=f"{3 * d}, 4, 48")
    path = _write(tmp_path, f"rnn_{cls}", text)
    t = time.perf_counter()
    p = load_problem(path, smoke=False)
    assert time.perf_counter() - t < 10  # the meta path alone unrolls 512 steps x 3 layers
    ns: dict = {}
    exec(text, ns)
    torch.manual_seed(0)
    with torch.no_grad():
        real = ns["Model"]()(*ns["get_inputs"]())
    assert p.output_shapes == [tuple(t.shape) for t in real]
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[cls]
    per_step = sum(2 * 4 * gates * 48 * d * ((32 if layer == 0 else d * 48) + 48) for layer in range(3))
    assert p.flops >= 512 * per_step


def test_missing_package_is_one_clear_line(tmp_path):
    path = _write(tmp_path, "needs_pkg", "import einops_not_here\n")
    with pytest.raises(ProblemError) as e:
        load_problem(path, smoke=False)
    assert "einops_not_here" in str(e.value) and "pip install" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("declared,ok", [('("default",)', True), ('("default", "scaled")', True),
                                         ('("scaled",)', False), ('("default", "flipped")', False)])
def test_input_variants_declaration_is_validated(tmp_path, declared, ok):
    text = ITEM_IN_INIT + f"\nINPUT_VARIANTS = {declared}\n"
    path = _write(tmp_path, "declared", text)
    if ok:
        load_problem(path, smoke=False)
    else:
        with pytest.raises(ProblemError, match="INPUT_VARIANTS"):
            load_problem(path, smoke=False)
