"""Structured inputs: the product of two upper-triangular matrices (KernelBench level1 14's
shape). A kernel may skip the zero halves: a shifted variant of the inputs would not be
triangular any more."""
import torch
import torch.nn as nn

N = 1024


class Model(nn.Module):
    def forward(self, a, b):
        return torch.triu(torch.matmul(a, b))


def get_inputs():
    return [torch.triu(torch.randn(N, N)), torch.triu(torch.randn(N, N))]


def get_init_inputs():
    return []
