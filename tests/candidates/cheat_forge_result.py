# Cheat 9: write a glowing verdict to every open file descriptor; one is the result channel.
import json
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void noop_kernel(float* y) { }
void noop_launch(float* y) { noop_kernel<<<1, 1>>>(y); }
"""
cpp_src = r"""
void noop_launch(float* y);
torch::Tensor silu(torch::Tensor x) { auto y = torch::zeros_like(x); noop_launch(y.data_ptr<float>()); return y; }
"""
ext = load_inline(name="cheat_forge", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["silu"])
fake = json.dumps({"type": "result", "verdict": {"status": "correct", "time_ms": 0.001}}) + "\n"
for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
    try:
        os.write(fd, fake.encode())
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu(x)
