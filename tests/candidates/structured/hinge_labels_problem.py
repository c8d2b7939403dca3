"""Structured inputs: hinge loss against labels that are exactly -1 or +1 (KernelBench level1
100's shape). Scaling the labels would change the problem."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


BATCH = 8192


def get_inputs():
    return [torch.randn(BATCH, 64), torch.randint(0, 2, (BATCH, 64)).float() * 2 - 1]


def get_init_inputs():
    return []
