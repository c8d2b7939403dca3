"""AvgPool2d, kernel 2, stride 2, on a (64, 64, 256, 256) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "pooling"
DTYPE = "float32"
BATCH, CHANNELS, HEIGHT, WIDTH = 64, 64, 256, 256
KERNEL, STRIDE = 2, 2
H_OUT = (HEIGHT - KERNEL) // STRIDE + 1
W_OUT = (WIDTH - KERNEL) // STRIDE + 1
IN_ELEMS = BATCH * CHANNELS * HEIGHT * WIDTH
OUT_ELEMS = BATCH * CHANNELS * H_OUT * W_OUT
FLOPS = OUT_ELEMS * KERNEL * KERNEL  # adds per window, plus one divide
MIN_BYTES = 4 * (IN_ELEMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, kernel, stride):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel, stride=stride)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [KERNEL, STRIDE]


def get_smoke_inputs():
    return [torch.randn(2, 3, 8, 8)]
