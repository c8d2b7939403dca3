# Cheat 6: return at once and launch the work from a background thread.
import threading

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
void silu_into(torch::Tensor x, torch::Tensor y) { silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); }
"""
ext = load_inline(name="cheat_thread", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu_into"])


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        worker = threading.Thread(target=ext.silu_into, args=(x, y), daemon=True)
        worker.start()
        return y
