"""Import a candidate from a real file. Standard library only (runs inside the GPU worker).

Triton's @jit reads its function's source through `inspect`, which needs a file on disk; a
candidate exec'd from a string fails there. The file goes next to the worker's private build
directory when the worker is sandboxed, else into a temporary directory.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

BUILD_ENV = "KWB_BUILD_DIR"  # as in workbench.gpu.buildhook


def _directory() -> Path:
    build = os.environ.get(BUILD_ENV)
    if build:
        path = Path(build).parent / "candidate"
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix="kwb-candidate-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def import_source(source: str, name: str = "candidate") -> types.ModuleType:
    """Write `source` to <dir>/<name>.py and import it as module `name`."""
    path = _directory() / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def triton_cache_default(cache_dir: Path) -> None:
    """Triton's compiled kernels in our cache dir, unless the sandbox chose a private one."""
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(cache_dir) / "triton"))
