"""fp32 matmul with a tiny inner dim, (16384, 32) @ (32, 16384): output-write bound."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float32"
M, N, K = 16384, 16384, 32
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
    return [torch.randn(8, K), torch.randn(K, 12)]
