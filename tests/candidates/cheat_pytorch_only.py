# Cheat 13c: no kernel at all, just the reference op under a new name.
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.silu(x)
