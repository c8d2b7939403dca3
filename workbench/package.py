"""Turn what load_inline received into the files of an installable PyTorch extension.

The .cpp and .cu files are the translation units load_inline itself writes (its implicit
headers prepended, its pybind11 block appended: torch/utils/cpp_extension.py, load_inline), so
the package compiles the same code. setup.py uses CUDAExtension/BuildExtension, which define
TORCH_EXTENSION_NAME from the extension's name as load_inline's build does.
"""
from __future__ import annotations

import json
import re

CPP_HEADER = "#include <torch/extension.h>"
CUDA_HEADERS = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]


def module_name(problem: str, kernel_id: int) -> str:
    """A Python identifier naming the exported package, e.g. kwb_softmax_k12."""
    stem = re.sub(r"[^0-9a-zA-Z]+", "_", problem).strip("_").lower() or "problem"
    return f"kwb_{stem}_k{kernel_id}"


def cpp_unit(ext: dict) -> str:
    """The .cpp load_inline compiles: header, the C++ sources, then bindings for `functions`."""
    parts = [CPP_HEADER, *ext.get("cpp_sources", [])]
    functions = ext.get("functions")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        docs = functions if isinstance(functions, dict) else {f: f for f in functions}
        parts.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        # load_inline's default with_pytorch_error_handling=True wraps each binding.
        parts += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{doc}");'
                  for f, doc in docs.items()]
        parts.append("}")
    return "\n".join(parts)


def cuda_unit(ext: dict) -> str | None:
    """The .cu load_inline compiles, or None when the extension has no CUDA sources."""
    sources = ext.get("cuda_sources") or []
    return "\n".join(CUDA_HEADERS + list(sources)) if sources else None


def submodule(index: int) -> str:
    return "_C" if index == 0 else f"_C{index}"


def package_files(module: str, extensions: list[dict], banner: str) -> dict[str, str]:
    """Relative path -> text: csrc/*_binding.cpp and *.cu, the Python package, setup files."""
    files: dict[str, str] = {}
    ext_specs = []
    for i, ext in enumerate(extensions):
        stem = module if i == 0 else f"{module}_{i}"
        # Distinct stems: setuptools names objects by stem, and x.cpp and x.cu would collide.
        sources = [f"csrc/{stem}_binding.cpp"]
        files[sources[0]] = f"// {banner}\n{cpp_unit(ext)}\n"
        cuda = cuda_unit(ext)
        if cuda is not None:
            files[f"csrc/{stem}.cu"] = f"// {banner}\n{cuda}\n"
            sources.append(f"csrc/{stem}.cu")
        ext_specs.append({"name": f"{module}.{submodule(i)}", "sources": sources,
                          "cxx": ext.get("extra_cflags") or [],
                          "nvcc": ext.get("extra_cuda_cflags") or [],
                          "ldflags": ext.get("extra_ldflags") or [],
                          "include_dirs": ext.get("extra_include_paths") or []})
    names = {ext["name"]: submodule(i) for i, ext in enumerate(extensions)}
    files["setup.py"] = SETUP_PY.format(specs=json.dumps(ext_specs, indent=4), module=module)
    files["pyproject.toml"] = PYPROJECT.format(module=module, banner=banner)
    files[f"{module}/__init__.py"] = INIT_PY.format(
        module=module, banner=banner, names=json.dumps(names))
    return files


SETUP_PY = '''"""Builds against the torch already installed: pip install --no-build-isolation ."""
import sys

from setuptools import setup

try:
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension
except ImportError:
    sys.exit("error: torch is not importable by this build; install torch, then build with "
             "`pip install --no-build-isolation .` so the build uses it")

EXTENSIONS = {specs}

setup(
    packages=["{module}"],
    package_data={{"{module}": ["solution.py"]}},
    ext_modules=[
        CUDAExtension(
            spec["name"], spec["sources"], include_dirs=spec["include_dirs"],
            extra_compile_args={{"cxx": spec["cxx"], "nvcc": spec["nvcc"]}},
            extra_link_args=spec["ldflags"])
        for spec in EXTENSIONS
    ],
    cmdclass={{"build_ext": BuildExtension}},
)
'''

PYPROJECT = '''# {banner}
# Build against your installed torch (an isolated build would fetch another torch):
#   pip install --no-build-isolation .
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{module}"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = ["torch"]
'''

INIT_PY = '''"""{module}: {banner}

`import {module}` loads the compiled extension; its functions are this module's.
`{module}.ModelNew` is the exported solution with its load_inline calls served by this package
instead of compiling at run time.
"""
import functools
import importlib
import types
from pathlib import Path

import torch  # loads libtorch before the extension that links against it

from ._C import *  # noqa: F401,F403

# load_inline name -> compiled submodule
_EXTENSIONS = {names}


def _load_inline(name, *args, **kwargs):
    sub = _EXTENSIONS.get(name)
    if sub is None and len(_EXTENSIONS) == 1:
        sub = next(iter(_EXTENSIONS.values()))
    if sub is None:
        raise KeyError(f"{{name!r}} is none of this package's extensions {{sorted(_EXTENSIONS)}}")
    return importlib.import_module(f"{{__name__}}.{{sub}}")


@functools.cache
def _solution():
    """Run solution.py with load_inline answered by the installed extension."""
    from torch.utils import cpp_extension as _cpp_extension

    path = Path(__file__).with_name("solution.py")
    module = types.ModuleType(f"{{__name__}}.solution")
    module.__file__ = str(path)
    original = _cpp_extension.load_inline
    _cpp_extension.load_inline = _load_inline
    try:
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    finally:
        _cpp_extension.load_inline = original
    return module


def __getattr__(attr):
    if attr == "ModelNew":
        return _solution().ModelNew
    raise AttributeError(f"module {{__name__!r}} has no attribute {{attr!r}}")
'''
