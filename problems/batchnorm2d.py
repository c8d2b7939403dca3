"""BatchNorm2d with batch statistics (no running stats, so train/eval mode agree) on a (32, 64, 256, 256) fp32 input."""
import torch
import torch.nn as nn

FAMILY = "normalization"
DTYPE = "float32"
BATCH, CHANNELS, HEIGHT, WIDTH = 32, 64, 256, 256
ELEMS = BATCH * CHANNELS * HEIGHT * WIDTH
FLOPS = 7 * ELEMS  # sum, subtract, square, sum, scale by rstd, weight multiply, bias add
MIN_BYTES = 4 * (2 * ELEMS + 2 * CHANNELS)  # input, output, weight, bias


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        # track_running_stats=False: always normalizes with this batch's statistics and
        # mutates no buffers, whatever the module's train/eval mode.
        self.bn = nn.BatchNorm2d(channels, track_running_stats=False)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]


def get_smoke_inputs():
    return [torch.randn(2, CHANNELS, 4, 4)]
