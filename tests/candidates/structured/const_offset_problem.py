"""Output independent of the input: max over a single column minus its own mean is 0 whatever
x is, so the result is GELU(0) + offset (KernelBench level2 80's shape, with a non-zero offset)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, offset):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.register_buffer("offset", torch.full((1,), float(offset)))

    def forward(self, x):
        y = self.gemm(x)
        y = torch.max(y, dim=1, keepdim=True).values
        y = y - y.mean(dim=1, keepdim=True)
        return F.gelu(y) + self.offset


BATCH = 256


def get_inputs():
    return [torch.randn(BATCH, 512)]


def get_init_inputs():
    return [512, 1024, 0.5]
