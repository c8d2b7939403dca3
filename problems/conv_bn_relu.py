"""Conv2d 64->128 (kernel 3, padding 1, no bias) + BatchNorm2d with batch statistics + ReLU on a (16, 64, 128, 128) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "fused"
DTYPE = "float32"
BATCH, C_IN, C_OUT, HEIGHT, WIDTH = 16, 64, 128, 128, 128
KERNEL, PADDING = 3, 1
OUT_ELEMS = BATCH * C_OUT * HEIGHT * WIDTH
FLOPS = (2 * OUT_ELEMS * C_IN * KERNEL * KERNEL  # conv multiply-adds
         + 7 * OUT_ELEMS  # batch norm: sum, subtract, square, sum, scale, weight, bias
         + OUT_ELEMS)  # ReLU
PARAMS = C_OUT * C_IN * KERNEL * KERNEL + 2 * C_OUT
MIN_BYTES = 4 * (BATCH * C_IN * HEIGHT * WIDTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, padding):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, padding=padding, bias=False)
        # batch statistics always (no running stats): deterministic, no buffers mutated
        self.bn = nn.BatchNorm2d(c_out, track_running_stats=False)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, PADDING]


def get_smoke_inputs():
    return [torch.randn(2, C_IN, 6, 6)]
