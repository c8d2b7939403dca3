"""Where the CUDA toolkit and the GPUs are, without importing torch or touching a GPU."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


def find_cuda_home() -> Path | None:
    """The real toolkit root. A /usr/local/bin/nvcc link makes torch guess /usr/local, and
    linking then fails with "cannot find -lcudart": follow the link to the toolkit instead."""
    env = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if env and (Path(env) / "bin" / "nvcc").exists():
        return Path(env)
    nvcc = shutil.which("nvcc")
    candidates = [Path(nvcc).resolve().parent.parent] if nvcc else []
    candidates.append(Path("/usr/local/cuda"))
    for root in candidates:
        if (root / "bin" / "nvcc").exists() and (root / "include" / "cuda_runtime.h").exists():
            return root
    return None


def find_tool(name: str) -> str | None:
    """A CUDA tool (ncu, cuobjdump, ...) on PATH, else in the toolkit's bin/."""
    found = shutil.which(name)
    if found:
        return found
    home = find_cuda_home()
    return str(home / "bin" / name) if home and (home / "bin" / name).exists() else None


@dataclass
class Gpu:
    index: int
    name: str
    compute_cap: str
    driver: str
    memory_mib: int


@functools.cache
def torch_version() -> str:
    """The installed torch (workers and the problem loader run this interpreter's), read
    without importing it; "none" without torch."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def list_gpus() -> list[Gpu]:
    """GPUs as nvidia-smi sees them (empty when there is no driver or no GPU)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name,compute_cap,driver_version,memory.total",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5:
            gpus.append(Gpu(int(parts[0]), parts[1], parts[2], parts[3],
                            int(float(parts[4])) if parts[4].replace(".", "").isdigit() else 0))
    return gpus


def arch_list(gpus: list[Gpu]) -> str:
    """TORCH_CUDA_ARCH_LIST for this machine: its own GPUs' archs only (each extra arch roughly
    doubles compile time); without a GPU, the user's setting or a single default arch."""
    if gpus:
        return ";".join(sorted({g.compute_cap for g in gpus}))
    return os.environ.get("TORCH_CUDA_ARCH_LIST") or "9.0"


def build_env(gpus: list[Gpu] | None = None) -> dict[str, str]:
    """Environment additions every compile needs: toolkit root and local arch."""
    gpus = list_gpus() if gpus is None else gpus
    env = {"TORCH_CUDA_ARCH_LIST": arch_list(gpus)}
    home = find_cuda_home()
    if home:
        env["CUDA_HOME"] = str(home)
    return env
