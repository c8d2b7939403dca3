"""ConvTranspose2d 64->32 channels, kernel 4, stride 2, padding 1, with bias, on a (16, 64, 128, 128) fp32 input (2x upsampling)."""
import torch
import torch.nn as nn

FAMILY = "convolution"
DTYPE = "float32"
BATCH, C_IN, C_OUT, HEIGHT, WIDTH = 16, 64, 32, 128, 128
KERNEL, STRIDE, PADDING = 4, 2, 1
H_OUT = (HEIGHT - 1) * STRIDE - 2 * PADDING + KERNEL
W_OUT = (WIDTH - 1) * STRIDE - 2 * PADDING + KERNEL
OUT_ELEMS = BATCH * C_OUT * H_OUT * W_OUT
# Each input pixel meets KERNEL taps per axis; with this stride and padding exactly one tap per
# border lands in the cropped padding, so the useful taps per axis are KERNEL*size - 2*PADDING.
TAPS_H = KERNEL * HEIGHT - 2 * PADDING
TAPS_W = KERNEL * WIDTH - 2 * PADDING
FLOPS = 2 * BATCH * C_IN * C_OUT * TAPS_H * TAPS_W + OUT_ELEMS  # multiply-adds, plus the bias add
PARAMS = C_IN * C_OUT * KERNEL * KERNEL + C_OUT
MIN_BYTES = 4 * (BATCH * C_IN * HEIGHT * WIDTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, stride, padding):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, kernel, stride=stride, padding=padding)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, STRIDE, PADDING]


def get_smoke_inputs():
    return [torch.randn(2, C_IN, 5, 5)]
