"""Per-row mean Huber loss (delta 1) between two (16384, 8192) fp32 matrices."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "loss"
DTYPE = "float32"
BATCH, DIM = 16384, 8192
DELTA = 1.0
FLOPS = 6 * BATCH * DIM + BATCH  # subtract, abs, compare, square-or-linear (2), sum; divide per row
MIN_BYTES = 4 * (2 * BATCH * DIM + BATCH)


class Model(nn.Module):
    def __init__(self, delta):
        super().__init__()
        self.delta = delta

    def forward(self, predictions, targets):
        return F.huber_loss(predictions, targets, reduction="none", delta=self.delta).mean(dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DELTA]


def get_smoke_inputs():
    return [torch.randn(4, 16), torch.randn(4, 16)]
