"""Softplus (log(1 + exp(x)), linear above 20) on a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "activation"
DTYPE = "float32"
BATCH, DIM = 16384, 16384
FLOPS = 4 * BATCH * DIM  # compare, exp, add, log
MIN_BYTES = 2 * 4 * BATCH * DIM


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(4, 16)]
