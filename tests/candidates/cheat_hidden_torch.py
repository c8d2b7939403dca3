# Cheat 13d: a custom kernel runs (a copy), but cuBLAS-free PyTorch does the real work, hidden
# behind a helper so the static guard's forward scan does not see it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void copy_kernel(const float* a, float* b, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n / 64) b[i] = a[i];
}
void copy_launch(const float* a, float* b, long n) { copy_kernel<<<(n / 64 + 255) / 256, 256>>>(a, b, n); }
"""
cpp_src = r"""
void copy_launch(const float* a, float* b, long n);
torch::Tensor finish(torch::Tensor a) {
    auto b = a.sigmoid().mul(a);
    copy_launch(b.data_ptr<float>(), b.data_ptr<float>(), b.numel());
    return b;
}
"""
ext = load_inline(name="cheat_hidden", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["finish"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.finish(x)
