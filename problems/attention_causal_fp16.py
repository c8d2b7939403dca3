"""Causal fp16 attention, batch 16, 16 heads, seq 4096, head dim 128, against scaled_dot_product_attention (flash-attention shapes)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "fused"
DTYPE = "float16"
BATCH, HEADS, SEQ, HEAD_DIM = 16, 16, 4096, 128
# QK^T and PV over the causal half of the score matrix (the diagonal's half counted as in FA2).
FLOPS = 4 * BATCH * HEADS * SEQ * SEQ * HEAD_DIM // 2
MIN_BYTES = 2 * 4 * BATCH * HEADS * SEQ * HEAD_DIM  # q, k, v read once, the output written once


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(1, 2, 8, 16, dtype=torch.float16) for _ in range(3)]
