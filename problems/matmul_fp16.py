"""Square fp16 matrix multiply, 4096x4096 @ 4096x4096 (the CRFM team's next target: 52% of torch.matmul)."""
import torch
import torch.nn as nn

FAMILY = "matmul"
DTYPE = "float16"
# The default half-precision tolerance (1e-2 of the output's scale) holds for fp32 accumulation
# (cuBLAS's, and tensor cores' mma with an fp32 accumulator); accumulating 4096 products in fp16
# errs by ~sqrt(K) half-ulps and fails it, as it should.
M = N = K = 4096
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
    return [torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 12, dtype=torch.float16)]
