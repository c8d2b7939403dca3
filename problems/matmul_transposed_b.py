"""fp32 matmul with B stored transposed: (4096, 4096) @ (2048, 4096).T."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float32"
M, N, K = 4096, 2048, 4096
FLOPS = 2 * M * N * K
MIN_BYTES = 4 * (M * K + N * K + M * N)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b.T)


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(8, 16), torch.randn(4, 16)]
