"""Max (values only, no argmax) over the middle dim of a (128, 4096, 512) fp32 tensor."""
import torch
import torch.nn as nn

FAMILY = "reduction"
DTYPE = "float32"
BATCH, REDUCE, INNER = 128, 4096, 512
FLOPS = BATCH * REDUCE * INNER  # one comparison per element
MIN_BYTES = 4 * (BATCH * REDUCE * INNER + BATCH * INNER)


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.amax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, INNER)]


def get_init_inputs():
    return [1]


def get_smoke_inputs():
    return [torch.randn(2, 16, 8)]
