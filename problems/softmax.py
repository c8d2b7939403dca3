"""Softmax over dim 1 of a (4096, 65536) fp32 matrix (CRFM fast-kernels post)."""
import torch
import torch.nn as nn

FAMILY = "reduction"
DTYPE = "float32"
BATCH, DIM = 4096, 65536
FLOPS = 5 * BATCH * DIM  # max, subtract, exp, sum, divide
MIN_BYTES = 2 * 4 * BATCH * DIM


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(4, 16)]
