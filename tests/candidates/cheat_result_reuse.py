# Cheat 1: allocate the output and compute nothing, hoping the allocator hands back the block
# that still holds the reference's answer. A kernel is launched so something "runs".
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void touch_kernel(float* y) { }
void touch_launch(float* y) { touch_kernel<<<1, 1>>>(y); }
"""
cpp_src = r"""
void touch_launch(float* y);
torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    touch_launch(y.data_ptr<float>());
    return y;
}
"""
ext = load_inline(name="cheat_reuse", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
