"""GroupNorm with 8 groups and affine over a (32, 64, 256, 256) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "normalization"
DTYPE = "float32"
BATCH, CHANNELS, HEIGHT, WIDTH = 32, 64, 256, 256
GROUPS = 8
ELEMS = BATCH * CHANNELS * HEIGHT * WIDTH
FLOPS = 7 * ELEMS  # sum, subtract, square, sum, scale by rstd, weight multiply, bias add
MIN_BYTES = 4 * (2 * ELEMS + 2 * CHANNELS)  # input, output, weight, bias


class Model(nn.Module):
    def __init__(self, groups, channels):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [GROUPS, CHANNELS]


def get_smoke_inputs():
    return [torch.randn(2, CHANNELS, 4, 4)]
