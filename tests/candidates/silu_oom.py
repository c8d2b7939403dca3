# Asks for far more memory than the GPU has: the verdict must say out of memory.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void fill_kernel(float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.f;
}
void fill_launch(float* y, long n) { fill_kernel<<<(n + 255) / 256, 256>>>(y, n); }
"""
cpp_src = r"""
void fill_launch(float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty({1L << 40}, x.options());
    fill_launch(y.data_ptr<float>(), y.numel());
    return y;
}
"""
ext = load_inline(name="silu_oom", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
