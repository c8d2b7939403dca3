"""InstanceNorm2d (no affine, no running stats) over a (32, 64, 256, 256) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "normalization"
DTYPE = "float32"
BATCH, CHANNELS, HEIGHT, WIDTH = 32, 64, 256, 256
ELEMS = BATCH * CHANNELS * HEIGHT * WIDTH
FLOPS = 5 * ELEMS  # sum, subtract, square, sum, scale by rstd
MIN_BYTES = 4 * 2 * ELEMS


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]


def get_smoke_inputs():
    return [torch.randn(2, CHANNELS, 4, 4)]
