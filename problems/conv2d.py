"""Conv2d 3->96 channels, kernel 11, stride 4, padding 2, with bias, on a (100,3,224,224) fp32 input (CRFM fast-kernels post)."""
import torch
import torch.nn as nn

FAMILY = "convolution"
DTYPE = "float32"
BATCH, C_IN, C_OUT, HEIGHT, WIDTH = 100, 3, 96, 224, 224
KERNEL, STRIDE, PADDING = 11, 4, 2
H_OUT = (HEIGHT + 2 * PADDING - KERNEL) // STRIDE + 1
W_OUT = (WIDTH + 2 * PADDING - KERNEL) // STRIDE + 1
OUT_ELEMS = BATCH * C_OUT * H_OUT * W_OUT
FLOPS = 2 * OUT_ELEMS * C_IN * KERNEL * KERNEL + OUT_ELEMS  # multiply-adds, plus the bias add
PARAMS = C_OUT * C_IN * KERNEL * KERNEL + C_OUT
MIN_BYTES = 4 * (BATCH * C_IN * HEIGHT * WIDTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, stride, padding):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, STRIDE, PADDING]


def get_smoke_inputs():
    return [torch.randn(2, C_IN, 31, 31)]
