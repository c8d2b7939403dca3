"""Inclusive prefix sum (cumsum) along dim 1 of a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn

FAMILY = "scan"
DTYPE = "float32"
BATCH, LENGTH = 16384, 16384
FLOPS = BATCH * LENGTH  # one add per element
MIN_BYTES = 2 * 4 * BATCH * LENGTH


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, LENGTH)]


def get_init_inputs():
    return [1]


def get_smoke_inputs():
    return [torch.randn(4, 16)]
