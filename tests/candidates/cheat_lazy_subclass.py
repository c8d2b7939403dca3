# Cheat 7: return a tensor subclass that only does the work when the checker touches it.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void noop_kernel(float* y) { }
void noop_launch(float* y) { noop_kernel<<<1, 1>>>(y); }
"""
cpp_src = r"""
void noop_launch(float* y);
void touch(torch::Tensor y) { noop_launch(y.data_ptr<float>()); }
"""
ext = load_inline(name="cheat_lazy", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["touch"])


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = [F.silu(a.as_subclass(torch.Tensor)) if isinstance(a, Lazy) else a for a in args]
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        ext.touch(x)
        return x.as_subclass(Lazy)
