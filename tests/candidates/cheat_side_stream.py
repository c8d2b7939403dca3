# Cheat 5: do the work on a side stream so events on the current stream miss it. The side
# stream waits for the inputs but nothing waits for it: results are right after a device-wide
# sync, yet the timed call returns before the kernel ends.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.f + __expf(-x[i]));
}
void silu_launch(const float* x, float* y, long n, cudaStream_t s) {
    silu_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
"""
cpp_src = r"""
#include <cuda_runtime.h>
void silu_launch(const float* x, float* y, long n, cudaStream_t s);
torch::Tensor silu(torch::Tensor x, int64_t stream) {
    auto y = torch::empty_like(x);
    silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), (cudaStream_t)stream);
    return y;
}
"""
ext = load_inline(name="cheat_stream", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        return ext.silu(x, self.side.cuda_stream)
