"""Conv1d 64->64 channels, kernel 3, padding 1, with bias, on a (16, 64, 65536) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "convolution"
DTYPE = "float32"
BATCH, C_IN, C_OUT, LENGTH = 16, 64, 64, 65536
KERNEL, PADDING = 3, 1
L_OUT = LENGTH + 2 * PADDING - KERNEL + 1
OUT_ELEMS = BATCH * C_OUT * L_OUT
FLOPS = 2 * OUT_ELEMS * C_IN * KERNEL + OUT_ELEMS  # multiply-adds, plus the bias add
PARAMS = C_OUT * C_IN * KERNEL + C_OUT
MIN_BYTES = 4 * (BATCH * C_IN * LENGTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, padding):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, padding=padding)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, LENGTH)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, PADDING]


def get_smoke_inputs():
    return [torch.randn(2, C_IN, 32)]
