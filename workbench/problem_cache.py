"""Problems validated once: the description `load_problem` works out (it runs the problem's
code under torch, seconds) kept by the source's hash, so the next command that names the same
problem starts without importing torch. Standard library only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from workbench import cuda_env, problems
from workbench.problems import Problem, load_problem, resolve

VERSION = "problem cache v1"


def _cache_dir() -> Path:
    from workbench.gpu.pool import default_cache_dir  # here: the pool's modules cost ~0.1 s

    return default_cache_dir() / "problems"


def _entry(source: str, smoke: bool) -> Path:
    # The loader's own code is in the key: a changed description never comes from a stale entry.
    loader = hashlib.sha256(Path(problems.__file__).read_bytes()).hexdigest()
    key = hashlib.sha256(json.dumps([VERSION, loader, cuda_env.torch_version(), smoke, source]).encode()
                         ).hexdigest()
    return _cache_dir() / f"{key}.json"


def load(name_or_path: str | Path, smoke: bool = True) -> Problem:
    """load_problem, from the cache when this exact source was validated before. Raises
    ProblemError as load_problem does (failures are not cached: the user will fix the file)."""
    path = resolve(name_or_path)
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError):
        return load_problem(name_or_path, smoke)  # it says what is wrong, in one line
    entry = _entry(source, smoke)
    try:
        data = json.loads(entry.read_text())
        return Problem(**{**data, "name": path.stem, "path": path, "source": source,
                          "input_shapes": [tuple(s) for s in data["input_shapes"]],
                          "output_shapes": [tuple(s) for s in data["output_shapes"]]})
    except (OSError, ValueError, TypeError, KeyError):
        pass
    problem = load_problem(name_or_path, smoke)
    data = {k: v for k, v in dataclasses.asdict(problem).items()
            if k not in ("name", "path", "source")}
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, entry)
    except OSError:
        pass  # a read-only cache only costs time
    return problem
