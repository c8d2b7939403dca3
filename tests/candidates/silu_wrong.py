# Compiles and runs, but computes ReLU instead of SiLU: incorrect.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void act_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
void act_launch(const float* x, float* y, long n) { act_kernel<<<(n + 255) / 256, 256>>>(x, y, n); }
"""
cpp_src = r"""
void act_launch(const float* x, float* y, long n);
torch::Tensor act(torch::Tensor x) {
    auto y = torch::empty_like(x);
    act_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="silu_wrong", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["act"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.act(x)
