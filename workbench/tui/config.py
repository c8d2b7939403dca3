"""User configuration: ~/.config/kernel-workbench/config.toml and themes/*.toml there.

config.toml:
    theme = "workbench-light"
    [keymap]
    ideate = "ctrl+n"          # binding id = key(s), comma-separated for several
"""
from __future__ import annotations

import importlib.resources
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from textual.theme import Theme

from workbench.user_dirs import config_dir, config_file

DEFAULT_THEME = "workbench-dark"
_THEME_FIELDS = {"primary", "secondary", "warning", "error", "success", "accent", "foreground",
                 "background", "surface", "panel", "boost", "dark", "luminosity_spread",
                 "text_alpha", "variables"}


@dataclass
class Config:
    theme: str = DEFAULT_THEME
    keymap: dict[str, str] = field(default_factory=dict)
    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per thing that was wrong


def theme_from_toml(path: Path) -> Theme:
    """A Theme from a TOML file; raises ValueError with one line when the file is unusable."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: {e}") from None
    unknown = set(data) - _THEME_FIELDS - {"name"}
    if unknown:
        raise ValueError(f"{path}: unknown theme keys {sorted(unknown)}")
    if "primary" not in data:
        raise ValueError(f"{path}: a theme needs at least `primary`")
    name = data.pop("name", path.stem)
    try:
        return Theme(name=name, **data)
    except Exception as e:  # noqa: BLE001 - bad colour strings and the like: one line
        raise ValueError(f"{path}: {e}") from None


def _theme_files() -> list[Path]:
    shipped = Path(str(importlib.resources.files("workbench.themes")))
    user = config_dir() / "themes"
    return sorted(shipped.glob("*.toml")) + (sorted(user.glob("*.toml")) if user.is_dir() else [])


def load_config() -> Config:
    """Themes (shipped, then the user's) and the user's config; problems are collected, not raised."""
    config = Config()
    for path in _theme_files():
        try:
            config.themes.append(theme_from_toml(path))
        except ValueError as e:
            config.problems.append(str(e))
    path = config_file()
    if not path.is_file():
        return config
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        config.problems.append(f"{path}: {e}")
        return config
    if isinstance(data.get("theme"), str):
        config.theme = data["theme"]
    keymap = data.get("keymap", {})
    if not isinstance(keymap, dict) or not all(isinstance(v, str) for v in keymap.values()):
        config.problems.append(f"{path}: [keymap] must map binding ids to key strings")
    else:
        config.keymap = dict(keymap)
    return config
