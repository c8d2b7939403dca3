"""RMSNorm (eps 1e-6, learnable weight) over the last dim of a (16384, 8192) fp32 matrix."""
import torch
import torch.nn as nn

FAMILY = "normalization"
DTYPE = "float32"
BATCH, DIM = 16384, 8192
EPS = 1e-6
FLOPS = 4 * BATCH * DIM + 2 * BATCH  # square, sum, scale by rrms, weight multiply; mean+eps and rsqrt per row
MIN_BYTES = 4 * (2 * BATCH * DIM + DIM)  # input, output, weight


class Model(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=eps)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, EPS]


def get_smoke_inputs():
    return [torch.randn(4, DIM)]
