"""Per-kernel resources of a build: registers, shared memory, stack and spills.

Read from the built extension with `cuobjdump -res-usage` (no GPU needed; the toolkit's, or the
`nvidia-cuda-cuobjdump` wheel's), or from `ptxas -v` output when a build log carries it. Runs in
the parent process, never in the GPU worker. Standard library only.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from workbench import cuda_env

_FUNCTION = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_FIELDS = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")
_PTXAS_ENTRY = re.compile(r"Function properties for (\S+)")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")
_MANGLED_NAME = re.compile(r"(\d+)")


def base_name(symbol: str) -> str:
    """The plain function name of a (possibly mangled or demangled) kernel symbol:
    `_Z9tiled_sumILi32EEvPKfPfi` and `void tiled_sum<32>(float const*, float*, int)` both give
    `tiled_sum`; `_ZN2ns6kernelEPf` gives `kernel` (the innermost name)."""
    if symbol.startswith("_Z"):
        rest = symbol[2:]
        nested = rest.startswith("N")
        rest = rest[1:] if nested else rest
        name = ""
        while True:
            while rest[:1] in ("K", "V", "L"):  # cv-qualifiers and internal linkage
                rest = rest[1:]
            m = _MANGLED_NAME.match(rest)
            if not m:
                break
            n = int(m.group(1))
            name = rest[m.end():m.end() + n]
            rest = rest[m.end() + n:]
            if not nested:
                break
            if rest.startswith("I"):  # template arguments after a nested component
                break
        return name or symbol
    text = symbol.split("(")[0].strip()
    text = re.sub(r"<.*>", "", text)
    return text.split("::")[-1].split()[-1] if text else symbol


def parse_res_usage(text: str) -> list[dict]:
    """Kernels in `cuobjdump -res-usage` output: [{symbol, name, registers, shared_bytes,
    stack_bytes, local_bytes, constant_bytes}]. SHARED includes the 1 KiB per block the
    driver reserves on sm_80 and newer."""
    kernels, current = [], None
    for line in text.splitlines():
        m = _FUNCTION.match(line)
        if m:
            current = m.group(1)
            continue
        if current and "REG:" in line:
            f = dict(_FIELDS.findall(line))
            kernels.append({"symbol": current, "name": base_name(current),
                            "registers": int(f.get("REG", 0)),
                            "shared_bytes": int(f.get("SHARED", 0)),
                            "stack_bytes": int(f.get("STACK", 0)),
                            "local_bytes": int(f.get("LOCAL", 0)),
                            "constant_bytes": int(f.get("CONSTANT[0]", 0))})
            current = None
    return kernels


def parse_ptxas(text: str) -> list[dict]:
    """Kernels in `ptxas -v` (nvcc -Xptxas -v) output: [{symbol, name, registers, shared_bytes,
    stack_bytes, spill_store_bytes, spill_load_bytes}]."""
    kernels: list[dict] = []
    current: dict | None = None
    for line in text.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = {"symbol": m.group(1), "name": base_name(m.group(1))}
            continue
        if current is None:
            continue
        m = _PTXAS_FRAME.search(line)
        if m:
            current.update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                           spill_load_bytes=int(m.group(3)))
            continue
        m = _PTXAS_USED.search(line)
        if m:
            current.update(registers=int(m.group(1)), shared_bytes=int(m.group(2) or 0))
            kernels.append(current)
            current = None
    return kernels


def find_cuobjdump() -> str | None:
    """The toolkit's cuobjdump, else the one the nvidia-cuda-cuobjdump wheel ships."""
    found = cuda_env.find_tool("cuobjdump")
    if found:
        return found
    try:
        import nvidia  # the namespace package of NVIDIA's CUDA wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for path in sorted(Path(root).glob("cu*/bin/cuobjdump")):
            if os.access(path, os.X_OK):
                return str(path)
    return None


def built_objects(cache_dir: Path, cache_key: str | None) -> list[Path]:
    """The shared objects of a build, from the verdict's cache key (one hash per load_inline)."""
    found: list[Path] = []
    for key in filter(None, (cache_key or "").split(",")):
        found += sorted((Path(cache_dir) / "ext" / key[:2] / key).glob("*.so"))
    return found


def resource_usage(objects: list[Path], timeout_s: float = 30.0) -> dict:
    """{"kernels": [...], "tool": "cuobjdump"} or {"error": one line} for a build's objects."""
    if not objects:
        return {"error": "no built extension found in the cache"}
    tool = find_cuobjdump()
    if tool is None:
        return {"error": "cuobjdump not found (install the CUDA toolkit, or "
                         "pip install nvidia-cuda-cuobjdump)"}
    kernels: list[dict] = []
    for obj in objects:
        try:
            out = subprocess.run([tool, "-res-usage", str(obj)], capture_output=True, text=True,
                                 timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"error": f"cuobjdump failed on {obj.name}: {type(e).__name__}"}
        if out.returncode != 0:
            first = (out.stderr.strip().splitlines() or ["no message"])[0]
            return {"error": f"cuobjdump failed on {obj.name}: {first}"}
        kernels += parse_res_usage(out.stdout)
    return {"kernels": kernels, "tool": "cuobjdump"}
