# Honest kernel for triu_matmul_problem: exploits the structure. Tiles below the diagonal are
# written as zeros without a product; above it, only the k-tiles where both A's row and B's
# column can be non-zero are read (about a sixth of the dense work).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#define T 32
__global__ void triu_mm(const float* A, const float* B, float* C, int n) {
    __shared__ float As[T][T + 1], Bs[T][T + 1];
    int bi = blockIdx.y, bj = blockIdx.x, ty = threadIdx.y, tx = threadIdx.x;
    int i = bi * T + ty, j = bj * T + tx;
    float acc = 0.f;
    if (bj >= bi) {
        for (int kt = bi; kt <= bj; ++kt) {  // A[i][k] = 0 for k < i; B[k][j] = 0 for k > j
            int ka = kt * T + tx, kb = kt * T + ty;
            As[ty][tx] = (i < n && ka < n) ? A[(long)i * n + ka] : 0.f;
            Bs[ty][tx] = (kb < n && j < n) ? B[(long)kb * n + j] : 0.f;
            __syncthreads();
            for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
            __syncthreads();
        }
    }
    if (i < n && j < n) C[(long)i * n + j] = j >= i ? acc : 0.f;
}
void triu_mm_launch(const float* A, const float* B, float* C, int n) {
    dim3 grid((n + T - 1) / T, (n + T - 1) / T), block(T, T);
    triu_mm<<<grid, block>>>(A, B, C, n);
}
"""
cpp_src = r"""
void triu_mm_launch(const float* A, const float* B, float* C, int n);
torch::Tensor triu_matmul(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous(), bc = b.contiguous();
    auto c = torch::empty_like(ac);
    triu_mm_launch(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), a.size(0));
    return c;
}
"""
ext = load_inline(name="triu_matmul_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["triu_matmul"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.triu_matmul(a, b)
