# Honest kernel for const_offset_problem: the output never depends on x (max over one column
# minus its own mean is 0, GELU(0) = 0), so it writes the offset without reading x or the GEMM.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void fill_offset(const float* offset, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = offset[0];
}
void fill_launch(const float* offset, float* y, long n) {
    fill_offset<<<(unsigned)((n + 255) / 256), 256>>>(offset, y, n);
}
"""
cpp_src = r"""
void fill_launch(const float* offset, float* y, long n);
torch::Tensor constant_rows(torch::Tensor x, torch::Tensor offset) {
    auto y = torch::empty({x.size(0), 1}, x.options());
    fill_launch(offset.data_ptr<float>(), y.data_ptr<float>(), y.numel());
    return y;
}
"""
ext = load_inline(name="const_offset_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["constant_rows"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, offset):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # kept for the weights' names only
        self.register_buffer("offset", torch.full((1,), float(offset)))

    def forward(self, x):
        return ext.constant_rows(x, self.offset)
