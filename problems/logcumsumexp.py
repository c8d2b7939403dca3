"""Running log-sum-exp (logcumsumexp) along dim 1 of an (8192, 32768) fp32 matrix."""
import torch
import torch.nn as nn

FAMILY = "scan"
DTYPE = "float32"
BATCH, LENGTH = 8192, 32768
FLOPS = 6 * BATCH * LENGTH  # stable log-add-exp per element: max, min, subtract, exp, log1p, add
MIN_BYTES = 2 * 4 * BATCH * LENGTH


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.logcumsumexp(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, LENGTH)]


def get_init_inputs():
    return [1]


def get_smoke_inputs():
    return [torch.randn(4, 16)]
