"""Fast, cached builds for `load_inline` candidates. Imports only torch and the standard library.

Installed in each worker before a candidate runs, it replaces torch.utils.cpp_extension.load_inline
with an equivalent that:
  - keys the build by a hash of sources + flags + toolchain (name and build dir), so the same
    candidate never builds twice and two candidates sharing a name never share a build dir;
  - leaves torch headers out of the .cu when the CUDA source doesn't use torch (raw-pointer
    launchers): nvcc on torch/types.h alone costs ~28 s;
  - only reads the shared cache: a miss goes to the parent, whose clean builder (a sandboxed
    process that runs no candidate code, workbench.gpu.clean_build) builds the call's
    arguments under the key the parent computes itself, so a candidate can never place what
    another candidate loads;
  - uses torch's precompiled torch/extension.h for the C++ binding unit when the parent's trusted
    set-up (workbench.gpu.prepare) has built it;
  - records what it was given, for the verdict and for export.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

HOOK_VERSION = "2"  # 2: with_cuda in the key (the builder honours it)
# Anything here in a CUDA source means it needs torch's headers.
TORCH_IN_CUDA = re.compile(r"\btorch\b|\bat::|\bc10\b|\bTensor\b|TORCH_|AT_DISPATCH|AT_ASSERT|<ATen/")
OPT_FLAG = re.compile(r"^-O\d?$")
BUILD_ENV = "KWB_BUILD_DIR"


@contextmanager
def file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _listify(x) -> list[str]:
    """Flags as a list, without the empty strings KernelBench solutions often pass
    (extra_cflags=[""]), which would otherwise cost them the shared precompiled header."""
    if x is None:
        return []
    return [f for f in ([x] if isinstance(x, str) else list(x)) if f.strip()]


class BuildRecorder:
    """What each load_inline call received and how long its build took."""

    def __init__(self) -> None:
        self.extensions: list[dict] = []
        self.seconds = 0.0
        self.cache_hit = True
        self.keys: list[str] = []


def _sanitize(name: str) -> str:
    clean = re.sub(r"\W", "_", str(name)) or "ext"
    return clean if not clean[0].isdigit() else "e" + clean


def toolchain() -> str:
    """What a build depends on besides its own arguments (part of its key)."""
    import torch

    return (f"{torch.__version__}|{torch.version.cuda}|{os.environ.get('TORCH_CUDA_ARCH_LIST')}|"
            f"{sys.version_info[:2]}")


def spec_of(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
            extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
            with_cuda=None, with_pytorch_error_handling=True) -> dict:
    """A load_inline call as plain data: everything its build depends on, nothing else."""
    cuda = _listify(cuda_sources)
    if isinstance(functions, str):
        functions = [functions]
    fn_map = functions if isinstance(functions, dict) else (
        {f: f for f in functions} if functions is not None else None)
    record = {"name": str(name), "cpp_sources": _listify(cpp_sources), "cuda_sources": cuda,
              "functions": list(fn_map) if fn_map is not None else None,
              "extra_cflags": _listify(extra_cflags), "extra_cuda_cflags": _listify(extra_cuda_cflags),
              "extra_ldflags": _listify(extra_ldflags),
              "extra_include_paths": _listify(extra_include_paths)}
    return {"toolchain": toolchain(), "record": record, "fn_map": fn_map,
            "error_handling": bool(with_pytorch_error_handling),
            "with_cuda": bool(with_cuda) if with_cuda is not None else bool(cuda)}


def build_key(spec: dict) -> str:
    """The cache key of a build. Standard library only: the parent computes it from the spec
    itself rather than trusting a worker that ran candidate code."""
    return hashlib.sha256(json.dumps([HOOK_VERSION, spec], sort_keys=True).encode()).hexdigest()


def ext_name(spec: dict, key: str) -> str:
    return f"{_sanitize(spec['record']['name'])}_{key[:12]}"


def build(spec: dict, build_dir: Path, key: str, load: bool = True):
    """Build `spec` in `build_dir` with torch's extension builder (ninja); import the module only
    when `load` (the clean builder never runs what it built)."""
    import torch.utils.cpp_extension as ce

    # A load_inline(use_pch=False) deletes torch's shared PCH, under other builds' feet.
    ce.remove_extension_h_precompiler_headers = lambda: None
    record = spec["record"]
    cpp, cuda, fn_map = record["cpp_sources"], record["cuda_sources"], spec["fn_map"]
    build_dir.mkdir(parents=True, exist_ok=True)
    torch_free_cuda = bool(cuda) and not any(TORCH_IN_CUDA.search(s) for s in cuda)
    cpp_text = ["#include <torch/extension.h>", *cpp]
    if fn_map is not None:
        wrap = "torch::wrap_pybind_function({0})" if spec["error_handling"] else "{0}"
        cpp_text.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        cpp_text += [f'm.def("{f}", {wrap.format(f)}, "{doc}");' for f, doc in fn_map.items()]
        cpp_text.append("}")
    head = (["#include <cuda.h>", "#include <cuda_runtime.h>"] if torch_free_cuda else
            ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"])
    sources = [_write(build_dir / "main.cpp", "\n".join(cpp_text))]
    if cuda:
        sources.append(_write(build_dir / "cuda.cu", "\n".join(head + cuda)))
    # The C++ unit holds only host glue; its -O level doesn't matter and one flag set lets
    # every candidate share one precompiled header.
    cflags = [f for f in record["extra_cflags"] if not OPT_FLAG.match(f)]
    importer = ce._import_module_from_library
    if not load:
        ce._import_module_from_library = lambda *args, **kwargs: None
    try:
        return ce.load(ext_name(spec, key), sources, extra_cflags=cflags,
                       extra_cuda_cflags=record["extra_cuda_cflags"],
                       extra_ldflags=record["extra_ldflags"],
                       extra_include_paths=record["extra_include_paths"],
                       build_directory=str(build_dir), with_cuda=spec["with_cuda"],
                       is_python_module=True, keep_intermediates=True)
    finally:
        ce._import_module_from_library = importer


def install(cache_dir: Path, recorder: BuildRecorder, gate=None) -> None:
    """Replace load_inline; hits load from cache_dir/ext. A miss is built by `gate.build(spec)`
    (the parent's clean builder, which runs no candidate code and returns the key it stored the
    build under) or, without a gate, here in $KWB_BUILD_DIR/<key>."""
    import torch.utils.cpp_extension as ce

    ce.remove_extension_h_precompiler_headers = lambda: None

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
                    build_directory=None, verbose=False, with_cuda=None, is_python_module=True,
                    with_pytorch_error_handling=True, keep_intermediates=True, use_pch=False,
                    **_ignored):
        spec = spec_of(name, cpp_sources, cuda_sources, functions, extra_cflags,
                       extra_cuda_cflags, extra_ldflags, extra_include_paths, with_cuda,
                       with_pytorch_error_handling)
        key = build_key(spec)
        recorder.extensions.append(spec["record"])
        if not cached(cache_dir, spec, key):
            recorder.cache_hit = False
            if gate is None:
                start = time.perf_counter()
                module = build(spec, Path(os.environ[BUILD_ENV]) / key, key)
                recorder.seconds += time.perf_counter() - start
                recorder.keys.append(key)
                return module
            key, seconds = gate.build(spec)
            recorder.seconds += seconds
        recorder.keys.append(key)
        start = time.perf_counter()
        folder = cached(cache_dir, spec, key)
        if folder is None:
            raise RuntimeError(f"the build of {name!r} is missing from the cache")
        module = ce._import_module_from_library(ext_name(spec, key), str(folder), is_python_module)
        recorder.seconds += time.perf_counter() - start
        return module

    ce.load_inline = load_inline


def cached(cache_dir: Path, spec: dict, key: str) -> Path | None:
    """The folder holding the build of `spec` under `key`, if it is in the cache."""
    folder = Path(cache_dir) / "ext" / key[:2] / key
    return folder if (folder / f"{ext_name(spec, key)}.so").is_file() else None


def _write(path: Path, text: str) -> str:
    # Rewriting an identical file would bump its mtime and make ninja rebuild it.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return str(path)
