"""Mean over dim 0 (column means) of a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn

FAMILY = "reduction"
DTYPE = "float32"
ROWS, COLS = 16384, 16384
FLOPS = ROWS * COLS + COLS  # one add per element, one divide per output
MIN_BYTES = 4 * (ROWS * COLS + COLS)


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [0]


def get_smoke_inputs():
    return [torch.randn(16, 4)]
