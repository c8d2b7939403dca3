"""Hostile but harmless: read a file no kernel needs (/etc/passwd) and print it."""
import torch

with open("/etc/passwd") as f:
    print("HOSTILE read", f.readline().strip())


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
