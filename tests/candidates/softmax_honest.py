# Honest softmax over dim 1: one block per row, online max/sum in one pass, then a write pass.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cfloat>
__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
}
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) combine(m, s, row[c], 1.f);
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffff, m, off), os = __shfl_xor_sync(0xffffffff, s, off);
        combine(m, s, om, os);
    }
    __shared__ float sm[32], ss[32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < blockDim.x / 32 ? sm[lane] : -FLT_MAX;
        s = lane < blockDim.x / 32 ? ss[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            float om = __shfl_xor_sync(0xffffffff, m, off), os = __shfl_xor_sync(0xffffffff, s, off);
            combine(m, s, om, os);
        }
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    float mx = sm[0], inv = 1.f / ss[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - mx) * inv;
}
void softmax_launch(const float* x, float* y, int rows, int cols) {
    softmax_rows<<<rows, 1024>>>(x, y, cols);
}
"""
cpp_src = r"""
void softmax_launch(const float* x, float* y, int rows, int cols);
torch::Tensor softmax(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32);
    auto y = torch::empty_like(x);
    softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}
"""
ext = load_inline(name="softmax_ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["softmax"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax(x)
