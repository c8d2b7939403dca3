# Cheat 13b: a kernel that always fails, with a silent fallback to PyTorch.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_kernel(const float* x, float* y, long n) { }
void silu_launch(const float* x, float* y, long n) { silu_kernel<<<1, 1>>>(x, y, n); }
"""
cpp_src = r"""
void silu_launch(const float* x, float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    TORCH_CHECK(x.numel() < 0, "unsupported shape");
    auto y = torch::empty_like(x);
    silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="cheat_fallback", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return ext.silu(x)
        except RuntimeError:
            return F.silu(x)
