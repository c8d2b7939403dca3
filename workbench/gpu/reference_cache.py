"""The reference's compile cache, shared between workers without a way to poison it.

Every worker compiles the reference with `torch.compile` into its own job directory (a
candidate must not write what the next reference compile reads), which costs each worker a
cold inductor and Triton compile: seconds of CPU per verdict. Instead, the first worker of a
problem that reaches "ready" before any candidate was handed to it (so no candidate code ever
ran in it) has its inductor and Triton caches copied into the shared cache by the parent;
each later worker of the same problem and settings starts with a private copy of them, so its
reference compile is a cache hit. Workers can read neither the shared copy nor another job's.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from workbench.gpu import sandbox

SUBDIRS = ("inductor", "triton")   # under a job's tmp/ (workbench.gpu.sandbox._env)
# 2: compiled without inductor's local autotune cache (workbench.gpu.evaluate); caches kept
# before hold autotuners that write to their worker's directory, and would never be replaced.
FORMAT = 2
MAX_BYTES = 64 << 20   # larger is not worth copying at every launch (the launcher thread copies)


def key(job: dict) -> str:
    """What the reference compile depends on: the problem and the settings (not the GPU index:
    inductor keys its own entries by device and toolchain)."""
    what = {k: job.get(k) for k in ("problem_source", "dtype", "settings")}
    what["format"] = FORMAT
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _folder(cache_dir: Path, ref_key: str) -> Path:
    return cache_dir / "reference" / ref_key[:2] / ref_key


def kept(cache_dir: Path, ref_key: str) -> bool:
    return _folder(cache_dir, ref_key).is_dir()


def plant(cache_dir: Path, ref_key: str, job_dir: Path) -> bool:
    """Give a new worker's job directory its own copy of the kept caches; False if none."""
    if not kept(cache_dir, ref_key):
        return False
    folder = _folder(cache_dir, ref_key)
    for sub in SUBDIRS:
        if (folder / sub).is_dir():
            shutil.copytree(folder / sub, job_dir / "tmp" / sub, symlinks=False, dirs_exist_ok=True)
    return True


def keep(cache_dir: Path, ref_key: str, job_dir: Path) -> bool:
    """Copy a clean worker's caches into the shared cache unless some are kept already. Call
    only while no candidate has been handed to that worker. Regular files only."""
    dest = _folder(cache_dir, ref_key)
    if dest.exists():
        return False
    files = [(f, Path(sub) / f.relative_to(job_dir / "tmp" / sub)) for sub in SUBDIRS
             for f in (job_dir / "tmp" / sub).rglob("*") if f.is_file() and not f.is_symlink()]
    if not files or sum(f.stat().st_size for f, _ in files) > MAX_BYTES:
        return False
    return sandbox.publish(files, dest)
