# Honest kernel for cumprod_problem: one warp per row, each lane a contiguous chunk, the chunk
# products combined by a warp scan (another multiplication order than PyTorch's).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void cumprod_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warps only: every lane of a warp shares its row
    int chunk = (cols + 31) / 32, start = lane * chunk, end = min(start + chunk, cols);
    const float* xr = x + (long)row * cols;
    float* yr = y + (long)row * cols;
    float p = 1.f;
    for (int c = start; c < end; ++c) p *= xr[c];
    float incl = p;
    for (int o = 1; o < 32; o <<= 1) {
        float v = __shfl_up_sync(0xffffffff, incl, o);
        if (lane >= o) incl *= v;
    }
    float run = __shfl_up_sync(0xffffffff, incl, 1);
    if (lane == 0) run = 1.f;
    for (int c = start; c < end; ++c) { run *= xr[c]; yr[c] = run; }
}
void cumprod_launch(const float* x, float* y, int rows, int cols) {
    cumprod_rows<<<(rows + 7) / 8, 256>>>(x, y, rows, cols);
}
"""
cpp_src = r"""
void cumprod_launch(const float* x, float* y, int rows, int cols);
torch::Tensor cumprod_dim1(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    cumprod_launch(xc.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}
"""
ext = load_inline(name="cumprod_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["cumprod_dim1"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.cumprod_dim1(x)
