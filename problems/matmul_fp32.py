"""Square fp32 matrix multiply, 4096x4096 @ 4096x4096 (CRFM fast-kernels post)."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float32"
M = N = K = 4096
FLOPS = 2 * M * N * K
MIN_BYTES = 4 * (M * K + K * N + M * N)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(8, 16), torch.randn(16, 12)]
