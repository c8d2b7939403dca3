"""Attention probabilities softmax(Q K^T / sqrt(d)) for fp32 Q, K of shape (32, 2048, 128) (batch*heads, seq, head dim)."""
import torch
import torch.nn as nn

FAMILY = "fused"
DTYPE = "float32"
# Logits are bilinear in the inputs: the verifier's inputs-times-10 trial makes them 100x larger, and
# two correct fp32 orderings then differ by ~3x a 1e-4 bound (~0.3x at 1e-3). TF32 inputs still fail
# at 1e-3: ~1.7x the bound at nominal scale, ~140x in the scaled trial.
ATOL = RTOL = 1e-3
BATCH_HEADS, SEQ, HEAD_DIM = 32, 2048, 128
SCORES = BATCH_HEADS * SEQ * SEQ
FLOPS = 2 * SCORES * HEAD_DIM + SCORES + 5 * SCORES  # QK^T, scale, softmax
MIN_BYTES = 4 * (2 * BATCH_HEADS * SEQ * HEAD_DIM + SCORES)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(BATCH_HEADS, SEQ, HEAD_DIM), torch.randn(BATCH_HEADS, SEQ, HEAD_DIM)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(2, 8, 16), torch.randn(2, 8, 16)]
