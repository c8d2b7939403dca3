# Honest SiLU written the way most KernelBench solutions are: torch types inside the .cu.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void silu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
torch::Tensor silu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    silu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "torch::Tensor silu_cuda(torch::Tensor x);"
silu = load_inline(name="silu_torch", cpp_sources=cpp_src, cuda_sources=cuda_src,
                   functions=["silu_cuda"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.silu = silu

    def forward(self, x):
        return self.silu.silu_cuda(x)
