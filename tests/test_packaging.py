"""`pip install .` ships only the packages pyproject.toml names: every package of the source tree
must be there, or the installed app fails on an import the editable checkout never noticed."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_python_folder_of_the_package_is_shipped():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {p.parent for p in (ROOT / "workbench").rglob("*.py") if "__pycache__" not in p.parts}
    expected = {".".join(folder.relative_to(ROOT).parts) for folder in folders}
    missing = sorted(expected - listed)
    assert not missing, f"packages missing from pyproject.toml [tool.setuptools] packages: {missing}"
