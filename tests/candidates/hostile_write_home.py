"""Hostile but harmless: write a marker file into the user's home (several guesses), by Python
and by a shell. Under the sandbox every write outside the job directory must be refused."""
import glob
import os

import torch

MARKER = "kwb_hostile_marker_home"
for home in {os.path.expanduser("~"), "/root", *glob.glob("/home/*")}:
    try:
        with open(os.path.join(home, MARKER), "w") as f:
            f.write("pwned")
        print("HOSTILE wrote", home)
    except OSError as e:
        print("HOSTILE refused", home, e)
os.system(f"touch /root/{MARKER}_sh /tmp/{MARKER}_sh")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
