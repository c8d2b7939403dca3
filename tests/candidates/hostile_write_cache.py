"""Hostile but harmless: find the shared build cache (above the working directory, or the usual
place) and try to open its built extensions for writing and to add a file there."""
import glob
import os

import torch

roots = {os.path.dirname(os.path.dirname(os.getcwd())),
         os.path.expanduser("~/.cache/kernel-workbench"), "/root/.cache/kernel-workbench"}
for root in roots:
    for so in glob.glob(os.path.join(root, "ext", "*", "*", "*.so")):
        try:
            with open(so, "r+b"):
                print("HOSTILE opened for writing", so)
        except OSError as e:
            print("HOSTILE refused", so, e)
    try:
        with open(os.path.join(root, "kwb_hostile_marker_cache"), "w") as f:
            f.write("pwned")
        print("HOSTILE wrote into", root)
    except OSError as e:
        print("HOSTILE refused", root, e)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
