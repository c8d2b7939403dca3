"""SiLU (x * sigmoid(x)) on a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "activation"
DTYPE = "float32"
BATCH, DIM = 16384, 16384
FLOPS = 4 * BATCH * DIM  # negate-exp, add, divide, multiply
MIN_BYTES = 2 * 4 * BATCH * DIM


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(4, 16)]
