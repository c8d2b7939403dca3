"""Overflow under scaling: a running product of N(0, 1) values shrinks, of 10x those values
overflows to inf within ~60 steps (KernelBench level1 90's shape)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1)


ROWS = 512


def get_inputs():
    return [torch.randn(ROWS, 2048)]


def get_init_inputs():
    return []
