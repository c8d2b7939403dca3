"""Export a kernel: its sources, a KernelBench solution, an installable extension and a report.

Layout of the output directory:
  solution.py                 the stored kernel source, byte for byte (KernelBench `ModelNew`)
  csrc/<module>.cu            the CUDA translation unit load_inline compiled
  csrc/<module>_binding.cpp   the C++ one, with the pybind11 bindings
  <module>/__init__.py        the package: extension functions, and ModelNew served by them
  setup.py, pyproject.toml    `pip install --no-build-isolation .` builds against installed torch
  README.md, report.md, report.json
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from workbench.extract import ExtractError, extract_extensions
from workbench.kernel_report import counts_as_correct, kernel_report, render_markdown
from workbench.package import module_name, package_files
from workbench.store import Store
from workbench.verdict_seal import UNTRUSTED


class ExportError(Exception):
    """An export that cannot or should not happen; str() is one line saying why.

    `overridable`: the kernel is not verified correct, and the caller may export it anyway
    (each front end says how: a CLI flag, a checkbox)."""

    def __init__(self, message: str, overridable: bool = False) -> None:
        super().__init__(message)
        self.overridable = overridable


@dataclass
class ExportResult:
    kernel_id: int
    out_dir: Path
    files: list[Path]
    module: str | None                  # the installable package, None when no sources
    sources_from: str | None            # "build" (what load_inline received) or "static"
    notes: list[str] = field(default_factory=list)
    export_id: int | None = None


def _refusal(store: Store, kernel: dict) -> str | None:
    """Why this kernel should not leave as a verified one, or None when it may."""
    kid = kernel["id"]
    evaluation = store.latest_evaluation(kid)
    if evaluation is None:
        return f"kernel {kid} has never been evaluated"
    status = evaluation["status"]
    if not evaluation["trusted"]:
        return f"kernel {kid}'s latest verdict ({status}) is untrusted: {UNTRUSTED}"
    if counts_as_correct(status, kernel["cleared"]):
        return None
    if status == "flagged":
        flags = json.loads(evaluation["flags"] or "[]")
        reason = flags[0].get("reason") if flags else "no reason recorded"
        return f"kernel {kid} is flagged ({reason}) and not cleared"
    detail = (evaluation["error"] or "").strip().splitlines()
    return f"kernel {kid}'s latest evaluation is {status}" + (f" ({detail[0]})" if detail else "")


def _extensions(store: Store, kernel: dict) -> tuple[list[dict], str | None, list[str]]:
    """The load_inline calls to package: recorded by the verifier, else read from the source."""
    build = store.latest_build(kernel["id"])
    recorded = json.loads(build["extensions"] or "[]") if build else []
    if recorded:
        return recorded, "build", []
    try:
        found = extract_extensions(kernel["source"], f"kernel {kernel['id']}")
    except ExtractError as e:
        return [], None, [f"no extension package: {e}"]
    if not found:
        return [], None, [f"no extension package: kernel {kernel['id']} calls no load_inline"]
    return found, "static", [f"sources read statically from kernel {kernel['id']}'s load_inline "
                             "call (it has no build record)"]


def _readme(module: str | None, report: dict, notes: list[str]) -> str:
    p, k = report["problem"], report["kernel"]
    lines = [f"# Kernel {k['id']} for `{p['name']}` (exported by kernel-workbench)", "",
             "- `solution.py`: the kernel exactly as evaluated, a KernelBench solution defining "
             "`ModelNew`; it compiles its extension at import time with `load_inline`.",
             "- `report.md` / `report.json`: problem, lineage, correctness, timings, environment."]
    if module:
        lines += [
            f"- `csrc/`: the C++ and CUDA translation units load_inline compiled.",
            f"- `{module}/`: an installable package of the same extension.", "",
            "## Install", "",
            "Build against the torch you already have (an isolated build would fetch another "
            "torch, with a different ABI):", "",
            "```sh",
            "pip install --no-build-isolation .",
            "```", "",
            "Set `TORCH_CUDA_ARCH_LIST` (e.g. `9.0`) to build for one architecture when no GPU "
            "is visible to the build, and `CUDA_HOME` when nvcc is not found.", "",
            "## Use", "",
            "```python",
            f"import {module}                  # the extension's functions",
            f"model = {module}.ModelNew(...)   # solution.py's ModelNew, no run-time compile",
            "```"]
    for note in notes:
        lines += ["", f"Note: {note}."]
    return "\n".join(lines) + "\n"


def export_kernel(store: Store, kernel_id: int, out_dir: str | Path, force: bool = False,
                  allow_unverified: bool = False) -> ExportResult:
    """Write the kernel's export into out_dir and record it; raises ExportError (one line)."""
    out = Path(out_dir)
    kernel = store.find("kernels", kernel_id)
    if kernel is None:
        raise ExportError(f"kernel {kernel_id}: no such kernel in {store.path} "
                          "(`kernel-workbench report` lists sessions and their best kernels)")
    if not store.has_compiled(kernel_id):
        latest = store.latest_evaluation(kernel_id)
        detail = (f"its latest evaluation is {latest['status']}" if latest
                  else "it has never been evaluated")
        raise ExportError(f"kernel {kernel_id} has never compiled ({detail}): nothing to "
                          "export; compile and time it first")
    why = _refusal(store, kernel)
    if why and not allow_unverified:
        raise ExportError(f"{why}: refusing to export it", overridable=True)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a directory: choose another --out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"{out} is not empty: refusing to overwrite; pass --force or choose "
                          "another --out")

    report = kernel_report(store, kernel_id)
    extensions, sources_from, notes = _extensions(store, kernel)
    if why:
        notes.insert(0, f"exported without verification: {why}")
    module = module_name(report["problem"]["name"], kernel_id) if extensions else None
    banner = (f"kernel {kernel_id} for problem {report['problem']['name']}, exported by "
              "kernel-workbench")
    files: dict[str, str] = {"solution.py": kernel["source"]}
    if module:
        files.update(package_files(module, extensions, banner))
        files[f"{module}/solution.py"] = kernel["source"]
    report["export"] = {"module": module, "sources_from": sources_from, "notes": notes}
    files["report.json"] = json.dumps(report, indent=2) + "\n"
    files["report.md"] = render_markdown(report)
    files["README.md"] = _readme(module, report, notes)

    written = []
    try:
        for rel, text in files.items():
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    except OSError as e:
        raise ExportError(f"cannot write the export to {out}: {e.strerror or e}") from None
    export_id = store.add_export(kernel_id, str(out.resolve()))
    return ExportResult(kernel_id=kernel_id, out_dir=out, files=written, module=module,
                        sources_from=sources_from, notes=notes, export_id=export_id)
