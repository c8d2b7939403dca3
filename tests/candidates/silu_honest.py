# Honest SiLU: raw-pointer launcher in a torch-free .cu, float4 loads, grid-stride loop.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void silu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = v.x / (1.f + __expf(-v.x)); v.y = v.y / (1.f + __expf(-v.y));
        v.z = v.z / (1.f + __expf(-v.z)); v.w = v.w / (1.f + __expf(-v.w));
        y[i] = v;
    }
}
__global__ void silu_tail(const float* x, float* y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.f + __expf(-x[i]));
}
void silu_launch(const float* x, float* y, long n) {
    long n4 = n / 4;
    int blocks = (int)((n4 + 255) / 256 < 132 * 32 ? (n4 + 255) / 256 : 132 * 32);
    if (n4 > 0) silu_kernel<<<blocks, 256>>>((const float4*)x, (float4*)y, n4);
    if (n % 4) silu_tail<<<1, 4>>>(x, y, n4 * 4, n);
}
"""
cpp_src = r"""
void silu_launch(const float* x, float* y, long n);
torch::Tensor silu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32);
    auto y = torch::empty_like(x);
    silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="silu_ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.silu(x)
