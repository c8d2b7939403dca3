"""Exact (erf) GELU on a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "activation"
DTYPE = "float32"
BATCH, DIM = 16384, 16384
FLOPS = 5 * BATCH * DIM  # 0.5 * x * (1 + erf(x / sqrt(2))): divide, erf, add, two multiplies
MIN_BYTES = 2 * 4 * BATCH * DIM


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(4, 16)]
