# Honest kernel for hinge_labels_problem: exploits labels being exactly -1 or +1 (a select,
# no multiply), then a deterministic two-pass sum.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void hinge_partial(const float* p, const float* t, float* partial, long n) {
    __shared__ float shared[32];
    float s = 0.f;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        s += fmaxf(t[i] > 0.f ? 1.f - p[i] : 1.f + p[i], 0.f);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? shared[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
        if (threadIdx.x == 0) partial[blockIdx.x] = s;
    }
}
__global__ void hinge_final(const float* partial, float* out, int blocks, long n) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double s = 0.0;
        for (int b = 0; b < blocks; ++b) s += partial[b];
        out[0] = (float)(s / n);
    }
}
void hinge_launch(const float* p, const float* t, float* partial, float* out, long n, int blocks) {
    hinge_partial<<<blocks, 256>>>(p, t, partial, n);
    hinge_final<<<1, 32>>>(partial, out, blocks, n);
}
"""
cpp_src = r"""
void hinge_launch(const float* p, const float* t, float* partial, float* out, long n, int blocks);
torch::Tensor hinge(torch::Tensor p, torch::Tensor t) {
    auto pc = p.contiguous(), tc = t.contiguous();
    int blocks = 264;
    auto partial = torch::empty({blocks}, p.options());
    auto out = torch::empty({}, p.options());
    hinge_launch(pc.data_ptr<float>(), tc.data_ptr<float>(), partial.data_ptr<float>(),
                 out.data_ptr<float>(), p.numel(), blocks);
    return out;
}
"""
ext = load_inline(name="hinge_labels_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["hinge"])


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return ext.hinge(predictions, targets)
