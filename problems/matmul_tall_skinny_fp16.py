"""Tall-skinny fp16 matrix multiply, (32768, 8192) @ (8192, 64): bandwidth-bound on tensor-core GPUs."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float16"
# Outputs stay inside fp16's range under the verifier's variants: x10 scaled inputs give sums
# of std ~9000 (max ~5 sigma of 2M outputs, under 65504); shifted ones a mean near 5200.
M, K, N = 32768, 8192, 64
FLOPS = 2 * M * N * K
MIN_BYTES = 2 * (M * K + K * N + M * N)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(32, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)]
