"""Sum over the last dim (keepdim) of a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn

FAMILY = "reduction"
DTYPE = "float32"
BATCH, DIM = 16384, 16384
FLOPS = BATCH * DIM  # one add per element
MIN_BYTES = 4 * (BATCH * DIM + BATCH)


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]


def get_smoke_inputs():
    return [torch.randn(4, 16)]
