"""Import contracts: core never imports textual; the GPU worker imports only torch + stdlib."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import workbench

ROOT = Path(workbench.__file__).parent
WORKER_SIDE = ["worker", "builder", "evaluate", "buildhook", "inputs", "timing", "runtime_guards",
               "stats", "compare", "confine", "observe", "prepare", "zygote"]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_never_imports_textual():
    core = [p for p in ROOT.rglob("*.py") if "tui" not in p.relative_to(ROOT).parts]
    assert len(core) > 10
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in _imports(p)
                                                  if n.split(".")[0] == "textual")
                 for p in core}
    assert not {k: v for k, v in offenders.items() if v}


def test_worker_imports_only_torch_and_stdlib():
    allowed_local = {f"workbench.gpu.{m}" for m in WORKER_SIDE} | {"workbench.gpu"}
    for name in WORKER_SIDE:
        for imported in _imports(ROOT / "gpu" / f"{name}.py"):
            top = imported.split(".")[0]
            assert top in sys.stdlib_module_names or top == "torch" or imported in allowed_local \
                or top == "__future__", f"gpu/{name}.py imports {imported}"
