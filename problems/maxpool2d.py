"""MaxPool2d, kernel 3, stride 2, padding 1, on a (64, 64, 256, 256) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "pooling"
DTYPE = "float32"
BATCH, CHANNELS, HEIGHT, WIDTH = 64, 64, 256, 256
KERNEL, STRIDE, PADDING = 3, 2, 1
H_OUT = (HEIGHT + 2 * PADDING - KERNEL) // STRIDE + 1
W_OUT = (WIDTH + 2 * PADDING - KERNEL) // STRIDE + 1
IN_ELEMS = BATCH * CHANNELS * HEIGHT * WIDTH
OUT_ELEMS = BATCH * CHANNELS * H_OUT * W_OUT
FLOPS = OUT_ELEMS * (KERNEL * KERNEL - 1)  # comparisons per window
MIN_BYTES = 4 * (IN_ELEMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, kernel, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [KERNEL, STRIDE, PADDING]


def get_smoke_inputs():
    return [torch.randn(2, 3, 9, 9)]
