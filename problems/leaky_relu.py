"""LeakyReLU with negative slope 0.01 on a (16384, 16384) fp32 matrix."""
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILY = "activation"
DTYPE = "float32"
BATCH, DIM = 16384, 16384
NEGATIVE_SLOPE = 0.01
FLOPS = 2 * BATCH * DIM  # compare, multiply
MIN_BYTES = 2 * 4 * BATCH * DIM


class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [NEGATIVE_SLOPE]


def get_smoke_inputs():
    return [torch.randn(4, 16)]
