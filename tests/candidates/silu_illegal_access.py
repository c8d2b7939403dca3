# Writes far past the end of its output: an illegal memory access that must cost only this worker.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i * 4096L + (1L << 40)] = x[i];
}
void silu_launch(const float* x, float* y, long n) {
    silu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
    cudaDeviceSynchronize();
}
"""
cpp_src = r"""
void silu_launch(const float* x, float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    C10_CUDA_CHECK(cudaGetLastError());
    return y;
}
"""
ext = load_inline(name="silu_oob", cpp_sources="#include <c10/cuda/CUDAException.h>\n" + cpp_src,
                  cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
