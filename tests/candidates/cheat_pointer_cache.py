# Cheat 11: cache results keyed on the input's pointer and shape; repeated calls skip the work.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.f + __expf(-x[i]));
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
ext = load_inline(name="cheat_cache", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.memo:
            self.memo[key] = ext.silu(x)
        return self.memo[key]
