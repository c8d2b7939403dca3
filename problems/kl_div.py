"""Per-row KL(target || input) between the softmax distributions of two (16384, 8192) fp32 logit matrices."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "loss"
DTYPE = "float32"
BATCH, DIM = 16384, 8192
# two log-softmaxes (max, subtract, exp, sum, subtract: 5 each), then exp, subtract, multiply, sum
FLOPS = 14 * BATCH * DIM + 2 * BATCH
MIN_BYTES = 4 * (2 * BATCH * DIM + BATCH)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, input_logits, target_logits):
        log_p = F.log_softmax(input_logits, dim=-1)
        log_q = F.log_softmax(target_logits, dim=-1)
        return F.kl_div(log_p, log_q, reduction="none", log_target=True).sum(dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []


def get_smoke_inputs():
    return [torch.randn(4, 16), torch.randn(4, 16)]
