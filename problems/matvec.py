"""fp32 matrix-vector product, (16384, 16384) @ (16384, 1)."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float32"
M, K = 16384, 16384
FLOPS = 2 * M * K
MIN_BYTES = 4 * (M * K + K + M)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, x):
        return torch.matmul(a, x)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(8, 16), torch.randn(16, 1)]
