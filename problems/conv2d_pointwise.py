"""Pointwise (1x1) conv2d 256->256 channels, with bias, on a (16, 256, 128, 128) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "convolution"
DTYPE = "float32"
BATCH, C_IN, C_OUT, HEIGHT, WIDTH = 16, 256, 256, 128, 128
OUT_ELEMS = BATCH * C_OUT * HEIGHT * WIDTH
FLOPS = 2 * OUT_ELEMS * C_IN + OUT_ELEMS  # multiply-adds, plus the bias add
PARAMS = C_OUT * C_IN + C_OUT
MIN_BYTES = 4 * (BATCH * C_IN * HEIGHT * WIDTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [C_IN, C_OUT]


def get_smoke_inputs():
    return [torch.randn(2, C_IN, 4, 4)]
