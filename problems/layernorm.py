"""LayerNorm with elementwise affine over the last three dims (64,256,256) of a (16,64,256,256) fp32 input (CRFM fast-kernels post)."""
import torch
import torch.nn as nn

FAMILY = "normalization"
DTYPE = "float32"
BATCH, FEATURES, HEIGHT, WIDTH = 16, 64, 256, 256
NORM_ELEMS = FEATURES * HEIGHT * WIDTH
ELEMS = BATCH * NORM_ELEMS
FLOPS = 7 * ELEMS  # sum, subtract, square, sum, scale by rstd, weight multiply, bias add
MIN_BYTES = 4 * (2 * ELEMS + 2 * NORM_ELEMS)  # input, output, weight, bias


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(BATCH, FEATURES, HEIGHT, WIDTH)]


def get_init_inputs():
    return [(FEATURES, HEIGHT, WIDTH)]


def get_smoke_inputs():
    # the normalized shape is fixed by the module, so only the batch can shrink
    return [torch.randn(1, FEATURES, HEIGHT, WIDTH)]
