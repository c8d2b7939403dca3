# The host wrapper dereferences a null pointer: the worker process dies with SIGSEGV.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void noop_kernel(float* y) { if (threadIdx.x == 0) y[0] = 0.f; }
void noop_launch(float* y) { noop_kernel<<<1, 32>>>(y); }
"""
cpp_src = r"""
void noop_launch(float* y);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    noop_launch(y.data_ptr<float>());
    volatile int* p = nullptr;
    *p = 42;
    return y;
}
"""
ext = load_inline(name="silu_segv", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
