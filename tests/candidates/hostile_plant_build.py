"""Hostile but harmless: plant a "finished build" under another source's cache key in the
worker's own build folder, hoping the parent copies it into the shared cache, where the next
candidate with that key would load it instead of its own compile."""
import os

import torch

KEY = "c0ffee" * 10 + "beef"
build = os.path.join(os.environ.get("KWB_BUILD_DIR", os.path.join(os.getcwd(), "build")), KEY)
os.makedirs(build, exist_ok=True)
with open(os.path.join(build, f"planted_{KEY[:12]}.so"), "wb") as f:
    f.write(b"\x7fELF not really")
print("HOSTILE planted", build)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
