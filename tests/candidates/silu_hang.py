# A kernel that never finishes: the worker must be killed at the time limit.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void spin_kernel(const float* x, float* y, long n) {
    volatile long k = 0;
    while (x[0] == x[0]) { k++; }
    y[0] = (float)k;
}
void spin_launch(const float* x, float* y, long n) { spin_kernel<<<1, 1>>>(x, y, n); }
"""
cpp_src = r"""
void spin_launch(const float* x, float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    spin_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="silu_hang", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.silu(x)
        torch.cuda.synchronize()
        return y
