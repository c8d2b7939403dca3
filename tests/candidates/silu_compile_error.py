# Does not compile: a typo in the kernel (undeclared identifier).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.f + __expf(-xx[i]));
}
void silu_launch(const float* x, float* y, long n) { silu_kernel<<<(n + 255) / 256, 256>>>(x, y, n); }
"""
cpp_src = r"""
void silu_launch(const float* x, float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="silu_bad", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
