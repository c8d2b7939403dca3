# Honest kernel for noise_mean_problem: group statistics, normalisation and the mean in its own
# order (one block per sample and group, atomics across groups): rounding noise of its own.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__device__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? shared[threadIdx.x] : 0.f;
    if (threadIdx.x < 32)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    __syncthreads();
    return v;  // valid in thread 0
}

__global__ void group_mean(const float* x, const float* gamma, const float* beta, float* out,
                           int channels, int groups, int hw, float eps) {
    __shared__ float shared[32];
    __shared__ float stats[2];
    int b = blockIdx.y, g = blockIdx.x, per = channels / groups;
    long count = (long)per * hw;
    const float* xg = x + ((long)b * channels + (long)g * per) * hw;
    float s = 0.f;
    for (long i = threadIdx.x; i < count; i += blockDim.x) s += xg[i];
    s = block_sum(s, shared);
    if (threadIdx.x == 0) stats[0] = s / count;
    __syncthreads();
    float mean = stats[0], q = 0.f;
    for (long i = threadIdx.x; i < count; i += blockDim.x) { float d = xg[i] - mean; q += d * d; }
    q = block_sum(q, shared);
    if (threadIdx.x == 0) stats[1] = rsqrtf(q / count + eps);
    __syncthreads();
    float rstd = stats[1], t = 0.f;
    for (long i = threadIdx.x; i < count; i += blockDim.x) {
        int c = g * per + (int)(i / hw);
        t += (xg[i] - mean) * rstd * gamma[c] + beta[c];
    }
    t = block_sum(t, shared);
    if (threadIdx.x == 0) atomicAdd(out + b, t / ((float)channels * hw));
}

void group_mean_launch(const float* x, const float* gamma, const float* beta, float* out,
                       int batch, int channels, int groups, int hw, float eps) {
    group_mean<<<dim3(groups, batch), 512>>>(x, gamma, beta, out, channels, groups, hw, eps);
}
"""
cpp_src = r"""
void group_mean_launch(const float* x, const float* gamma, const float* beta, float* out,
                       int batch, int channels, int groups, int hw, float eps);
torch::Tensor group_norm_mean(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta,
                              int64_t groups, double eps) {
    auto xc = x.contiguous();
    auto out = torch::zeros({x.size(0)}, x.options());
    group_mean_launch(xc.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                      out.data_ptr<float>(), x.size(0), x.size(1), groups,
                      x.size(2) * x.size(3), (float)eps);
    return out;
}
"""
ext = load_inline(name="noise_mean_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["group_norm_mean"])


class ModelNew(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)  # parameters only; the kernel uses them

    def forward(self, x):
        return ext.group_norm_mean(x, self.norm.weight, self.norm.bias, self.norm.num_groups,
                                   self.norm.eps)
