"""Per-sample cross-entropy (reduction none) of (32768, 8192) fp32 logits against int64 class targets."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "loss"
DTYPE = "float32"
BATCH, CLASSES = 32768, 8192
FLOPS = 4 * BATCH * CLASSES + 3 * BATCH  # max, subtract, exp, sum per logit; log, add, subtract target per row
MIN_BYTES = 4 * BATCH * CLASSES + 8 * BATCH + 4 * BATCH  # logits, int64 targets, losses


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction="none")


def get_inputs():
    return [torch.randn(BATCH, CLASSES), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(4, 16), torch.randint(0, 16, (4,))]
