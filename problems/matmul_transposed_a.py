"""fp32 matmul with A stored transposed: (2048, 4096).T @ (2048, 4096)."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float32"
M, N, K = 4096, 4096, 2048
FLOPS = 2 * M * N * K
MIN_BYTES = 4 * (K * M + K * N + M * N)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a.T, b)


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(16, 8), torch.randn(16, 4)]
