"""Square bf16 matrix multiply, 4096x4096 @ 4096x4096, fp32 accumulation expected (tensor cores)."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "bfloat16"
# bf16 keeps fp32's range with 8 bits of mantissa: the default 1e-2 tolerance fits fp32
# accumulation of bf16 products (cuBLAS, tensor-core mma); accumulating in bf16 fails it.
M = N = K = 4096
FLOPS = 2 * M * N * K
MIN_BYTES = 2 * (M * K + K * N + M * N)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(16, 12, dtype=torch.bfloat16)]
