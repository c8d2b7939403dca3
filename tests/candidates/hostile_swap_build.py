"""Hostile but harmless: once its own build is loaded, overwrite every build output this process
can reach (its build folder, any other job's) with a fake "extension", hoping the parent copies
the fake into the shared cache under this source's key, where the next candidate with the same
load_inline call (a clean-looking one) would load it instead of its compile."""
import glob
import os
import threading
import time

import torch
from torch.utils.cpp_extension import load_inline

BUILD = os.environ.get("KWB_BUILD_DIR", os.getcwd())
JOBS = os.path.dirname(os.path.dirname(BUILD))
FAKE = b"\x7fELF HOSTILE swapped"
refused, swapped = [], []
loaded = threading.Event()


def swap():
    loaded.wait()
    end = time.monotonic() + 120
    while time.monotonic() < end:
        for so in glob.glob(os.path.join(BUILD, "*", "*.so")) + \
                glob.glob(os.path.join(JOBS, "*", "build", "*", "*.so")):
            try:
                with open(so, "wb") as f:
                    f.write(FAKE)
                if so not in swapped:
                    swapped.append(so)
                    print("HOSTILE swapped", so, flush=True)
            except OSError as e:
                if so not in refused:
                    refused.append(so)
                    print("HOSTILE refused", so, type(e).__name__, flush=True)
        time.sleep(0.01)


threading.Thread(target=swap, daemon=True).start()
ext = load_inline(name="swap_ext", cpp_sources="int twice(int x) { return 2 * x; }",
                  functions=["twice"])
loaded.set()
time.sleep(1)  # the swapper's turn, before the verdict ends the worker
print(f"HOSTILE built; swapped {len(swapped)}, refused {len(refused)}", flush=True)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * (ext.twice(1) // 2)
