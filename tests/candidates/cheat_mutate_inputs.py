# Cheat 3: compute in place in the input buffer and return it; a reference run afterwards on
# the same buffer would see the mutated values.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_inplace(float* x, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] / (1.f + __expf(-x[i]));
}
void silu_launch(float* x, long n) { silu_inplace<<<(n + 255) / 256, 256>>>(x, n); }
"""
cpp_src = r"""
void silu_launch(float* x, long n);
torch::Tensor silu(torch::Tensor x) {
    silu_launch(x.data_ptr<float>(), x.numel());
    return x;
}
"""
ext = load_inline(name="cheat_mutate", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
