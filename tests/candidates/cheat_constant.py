# Cheat 4: return zeros from a trivial kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void zero_kernel(float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.f;
}
void zero_launch(float* y, long n) { zero_kernel<<<(n + 255) / 256, 256>>>(y, n); }
"""
cpp_src = r"""
void zero_launch(float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    zero_launch(y.data_ptr<float>(), y.numel());
    return y;
}
"""
ext = load_inline(name="cheat_const", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
