"""Trusted set-up that sandboxed workers cannot do for themselves, since they may not write
outside their job directory: torch's precompiled header for the C++ binding unit (shared by every
build, so a candidate must never be able to write it) and this GPU's measured ceilings.

Run by workbench.gpu.sandbox as `python -m workbench.gpu.prepare CACHE_DIR gpu|cpu`.
"""
from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    cache_dir, mode = Path(sys.argv[1]), sys.argv[2]
    import torch
    import torch.utils.cpp_extension as ce

    from workbench.gpu.buildhook import file_lock

    build_pch = getattr(ce, "_check_and_build_extension_h_precompiler_headers", None)
    if build_pch is not None:
        with file_lock(cache_dir / "pch.lock"):
            build_pch(None, None)
    if mode == "gpu" and torch.cuda.is_available():
        from workbench.gpu.evaluate import load_ceilings

        load_ceilings(cache_dir, torch.cuda.Event)


if __name__ == "__main__":
    main()
