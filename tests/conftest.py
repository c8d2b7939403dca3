"""Shared test setup: GPU tests skip with a reason where no CUDA device is present."""
from __future__ import annotations

import functools

import pytest


@functools.cache
def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no usable torch means no GPU tests
        return False


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device; none is present on this machine")
        for item in gpu_items:
            item.add_marker(skip)
