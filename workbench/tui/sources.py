"""What the CUDA pane shows: the CUDA and C++ a kernel file hands to load_inline, and diffs.

A candidate is a Python file with CUDA inside string literals. The build record holds exactly
what load_inline received; without one, workbench.extract resolves the load_inline call
statically; when even that fails (sources built at run time), string literals bound to names
whose text contains `__global__` are shown, as the best available guess.
"""
from __future__ import annotations

import ast
import difflib

from workbench import pyast
from workbench.extract import ExtractError, extract_extensions


def from_extensions(extensions: list | None) -> str | None:
    """CUDA then C++ sources of load_inline calls (the verdict's `extensions` shape), joined."""
    parts: list[str] = []
    for ext in extensions or []:
        if not isinstance(ext, dict):
            continue
        for key in ("cuda_sources", "cpp_sources"):
            texts = ext.get(key) or []
            for text in [texts] if isinstance(texts, str) else texts:
                if isinstance(text, str) and text.strip():
                    parts.append(f"// {ext.get('name') or 'extension'}: {key}\n{text.strip()}\n")
    return "\n".join(parts) or None


def global_literals(source: str) -> str | None:
    """String literals assigned to names, whose text holds a __global__ kernel."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return None
    parts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str) and "__global__" in node.value.value:
            names = ", ".join(ast.unparse(t) for t in node.targets)
            parts.append(f"// {names}\n{node.value.value.strip()}\n")
    return "\n".join(parts) or None


def cuda_view(source: str, recorded: list | None) -> str | None:
    """The CUDA/C++ to show for a kernel; None when the file holds none we can find."""
    found = from_extensions(recorded)
    if found:
        return found
    try:
        found = from_extensions(extract_extensions(source))
    except ExtractError:
        found = None
    return found or global_literals(source)


def unified_diff(parent: str, child: str, parent_name: str, child_name: str) -> str:
    lines = difflib.unified_diff(parent.splitlines(keepends=True),
                                 child.splitlines(keepends=True),
                                 fromfile=parent_name, tofile=child_name, n=3)
    return "".join(lines)
