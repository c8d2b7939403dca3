"""Conv2d 3->96 (kernel 11, stride 4, padding 2, bias) + ReLU + MaxPool2d(3, stride 2) on a (100,3,224,224) fp32 input (CRFM fast-kernels post)."""
import torch
import torch.nn as nn

FAMILY = "fused"
DTYPE = "float32"
BATCH, C_IN, C_OUT, HEIGHT, WIDTH = 100, 3, 96, 224, 224
KERNEL, STRIDE, PADDING = 11, 4, 2
POOL_KERNEL, POOL_STRIDE = 3, 2
H_CONV = (HEIGHT + 2 * PADDING - KERNEL) // STRIDE + 1
W_CONV = (WIDTH + 2 * PADDING - KERNEL) // STRIDE + 1
H_OUT = (H_CONV - POOL_KERNEL) // POOL_STRIDE + 1
W_OUT = (W_CONV - POOL_KERNEL) // POOL_STRIDE + 1
CONV_ELEMS = BATCH * C_OUT * H_CONV * W_CONV
OUT_ELEMS = BATCH * C_OUT * H_OUT * W_OUT
FLOPS = (2 * CONV_ELEMS * C_IN * KERNEL * KERNEL  # conv multiply-adds
         + 2 * CONV_ELEMS  # bias add, ReLU
         + OUT_ELEMS * (POOL_KERNEL * POOL_KERNEL - 1))  # pooling comparisons
PARAMS = C_OUT * C_IN * KERNEL * KERNEL + C_OUT
MIN_BYTES = 4 * (BATCH * C_IN * HEIGHT * WIDTH + PARAMS + OUT_ELEMS)


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, stride, padding, pool_kernel, pool_stride):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(pool_kernel, stride=pool_stride)

    def forward(self, x):
        return self.pool(self.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, STRIDE, PADDING, POOL_KERNEL, POOL_STRIDE]


def get_smoke_inputs():
    return [torch.randn(2, C_IN, 39, 39)]
