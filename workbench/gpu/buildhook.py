"""Fast, cached builds for `load_inline` candidates. Imports only torch and the standard library.

Installed in each worker before a candidate runs, it replaces torch.utils.cpp_extension.load_inline
with an equivalent that:
  - keys the build by a hash of sources + flags + toolchain (name and build dir), so the same
    candidate never builds twice and two candidates sharing a name never share a build dir;
  - leaves torch headers out of the .cu when the CUDA source doesn't use torch (raw-pointer
    launchers): nvcc on torch/types.h alone costs ~28 s;
  - builds in the worker's private directory (BUILD_ENV) and only reads the shared cache: the
    parent copies a finished build into the cache (workbench.gpu.sandbox.harvest), so a
    candidate can never write what another candidate loads;
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
from contextlib import contextmanager, nullcontext
from pathlib import Path

HOOK_VERSION = "1"
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
    clean = re.sub(r"\W", "_", name) or "ext"
    return clean if not clean[0].isdigit() else "e" + clean


def install(cache_dir: Path, recorder: BuildRecorder, gate=None) -> None:
    """Replace load_inline; builds go to $KWB_BUILD_DIR/<key>, hits load from cache_dir/ext.
    A build (a miss) runs inside `gate.slot(key)`: the parent hands out CPU slots, so a build's time
    limit starts when it gets one, not when it starts to wait."""
    import torch
    import torch.utils.cpp_extension as ce

    # A load_inline(use_pch=False) deletes torch's shared PCH, under other builds' feet.
    ce.remove_extension_h_precompiler_headers = lambda: None
    build_root = Path(os.environ[BUILD_ENV])
    toolchain = f"{torch.__version__}|{torch.version.cuda}|{os.environ.get('TORCH_CUDA_ARCH_LIST')}|{sys.version_info[:2]}"

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
                    build_directory=None, verbose=False, with_cuda=None, is_python_module=True,
                    with_pytorch_error_handling=True, keep_intermediates=True, use_pch=False,
                    **_ignored):
        cpp = _listify(cpp_sources)
        cuda = _listify(cuda_sources)
        if isinstance(functions, str):
            functions = [functions]
        fn_map = functions if isinstance(functions, dict) else (
            {f: f for f in functions} if functions is not None else None)
        # The C++ unit holds only host glue; its -O level doesn't matter and one flag set
        # lets every candidate share one precompiled header.
        cflags = [f for f in _listify(extra_cflags) if not OPT_FLAG.match(f)]
        cuda_flags = _listify(extra_cuda_cflags)
        ldflags = _listify(extra_ldflags)
        includes = _listify(extra_include_paths)
        record = {"name": name, "cpp_sources": cpp, "cuda_sources": cuda,
                  "functions": list(fn_map) if fn_map is not None else None,
                  "extra_cflags": _listify(extra_cflags), "extra_cuda_cflags": cuda_flags,
                  "extra_ldflags": ldflags, "extra_include_paths": includes}
        key = hashlib.sha256(json.dumps([HOOK_VERSION, toolchain, record, fn_map,
                                         with_pytorch_error_handling], sort_keys=True).encode()
                             ).hexdigest()
        ext_name = f"{_sanitize(name)}_{key[:12]}"
        recorder.extensions.append(record)
        recorder.keys.append(key)
        cached = cache_dir / "ext" / key[:2] / key
        if (cached / f"{ext_name}.so").is_file():
            start = time.perf_counter()
            module = ce._import_module_from_library(ext_name, str(cached), is_python_module)
            recorder.seconds += time.perf_counter() - start
            return module
        build_dir = build_root / key
        build_dir.mkdir(parents=True, exist_ok=True)

        torch_free_cuda = bool(cuda) and not any(TORCH_IN_CUDA.search(s) for s in cuda)
        cpp_text = ["#include <torch/extension.h>", *cpp]
        if fn_map is not None:
            wrap = "torch::wrap_pybind_function({0})" if with_pytorch_error_handling else "{0}"
            cpp_text.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
            cpp_text += [f'm.def("{f}", {wrap.format(f)}, "{doc}");' for f, doc in fn_map.items()]
            cpp_text.append("}")
        head = (["#include <cuda.h>", "#include <cuda_runtime.h>"] if torch_free_cuda else
                ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"])
        sources = [_write(build_dir / "main.cpp", "\n".join(cpp_text))]
        if cuda:
            sources.append(_write(build_dir / "cuda.cu", "\n".join(head + cuda)))

        with gate.slot(key) if gate else nullcontext():
            start = time.perf_counter()
            module = ce.load(ext_name, sources, extra_cflags=cflags, extra_cuda_cflags=cuda_flags,
                             extra_ldflags=ldflags, extra_include_paths=includes,
                             build_directory=str(build_dir), verbose=verbose,
                             with_cuda=with_cuda if with_cuda is not None else bool(cuda),
                             is_python_module=is_python_module,
                             keep_intermediates=keep_intermediates)
            recorder.seconds += time.perf_counter() - start
        recorder.cache_hit = False
        return module

    ce.load_inline = load_inline


def _write(path: Path, text: str) -> str:
    # Rewriting an identical file would bump its mtime and make ninja rebuild it.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return str(path)
