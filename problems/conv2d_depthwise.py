"""Depthwise conv2d (groups = 128 channels), kernel 3, padding 1, with bias, on a (16, 128, 256, 256) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "convolution"
DTYPE = "float32"
BATCH, CHANNELS, HEIGHT, WIDTH = 16, 128, 256, 256
KERNEL, PADDING = 3, 1
H_OUT = HEIGHT + 2 * PADDING - KERNEL + 1
W_OUT = WIDTH + 2 * PADDING - KERNEL + 1
OUT_ELEMS = BATCH * CHANNELS * H_OUT * W_OUT
FLOPS = 2 * OUT_ELEMS * KERNEL * KERNEL + OUT_ELEMS  # multiply-adds, plus the bias add
PARAMS = CHANNELS * KERNEL * KERNEL + CHANNELS
MIN_BYTES = 4 * (BATCH * CHANNELS * HEIGHT * WIDTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, channels, kernel, padding):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel, padding=padding, groups=channels)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, KERNEL, PADDING]


def get_smoke_inputs():
    return [torch.randn(2, CHANNELS, 6, 6)]
