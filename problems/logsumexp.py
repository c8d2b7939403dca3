"""Log-sum-exp over the last dim of a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn

FAMILY = "reduction"
DTYPE = "float32"
BATCH, DIM = 16384, 16384
FLOPS = 4 * BATCH * DIM + BATCH  # max, subtract, exp, sum per element; log and add per row
MIN_BYTES = 4 * (BATCH * DIM + BATCH)


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.logsumexp(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]


def get_smoke_inputs():
    return [torch.randn(4, 16)]
