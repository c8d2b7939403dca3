"""Output at rounding-noise level: the mean of a group-normalised tensor over all its channels
and positions is 0 in exact arithmetic (KernelBench level2 23's shape)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x).mean(dim=[1, 2, 3])


BATCH = 32


def get_inputs():
    return [torch.randn(BATCH, 64, 32, 32)]


def get_init_inputs():
    return [64, 8]
