"""The math settings PyTorch's baselines run under. Imports only torch and the standard library.

Correctness is always judged in strict fp32 (no TF32 anywhere). Eager and torch.compile are
timed as a PyTorch user runs them: by default with PyTorch's own defaults (cuDNN convolutions in
TF32, matmuls in full fp32), or as the session's `baseline` setting chooses. The candidate is
timed under the same settings, so PyTorch layers it keeps run as they would for the user.
"""
from __future__ import annotations

from contextlib import contextmanager

MODES = {
    # name: (matmul TF32, cuDNN TF32, description)
    "default": (False, True, "PyTorch defaults (cuDNN convolutions in TF32, matmuls in fp32)"),
    "strict": (False, False, "strict fp32 (TF32 off for matmuls and cuDNN)"),
    "tf32": (True, True, "TF32 on for matmuls and cuDNN"),
}


def describe(mode: str) -> dict:
    matmul, cudnn, text = MODES[mode]
    return {"mode": mode, "matmul_tf32": matmul, "cudnn_tf32": cudnn, "description": text,
            "correctness": "strict fp32"}


def apply(mode: str) -> None:
    import torch  # here, so reports can describe modes without loading torch

    matmul, cudnn, _ = MODES[mode]
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


@contextmanager
def strict():
    """Strict fp32 inside, the previous settings restored after."""
    import torch

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    apply("strict")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
