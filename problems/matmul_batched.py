"""Batched fp32 matmul, (128, 512, 1024) @ (128, 1024, 256)."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float32"
BATCH, M, K, N = 128, 512, 1024, 256
FLOPS = 2 * BATCH * M * N * K
MIN_BYTES = 4 * BATCH * (M * K + K * N + M * N)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(3, 8, 16), torch.randn(3, 16, 4)]
