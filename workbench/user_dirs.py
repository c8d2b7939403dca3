"""Where the workbench keeps the user's own files, by the XDG base-directory rules:
settings (config.toml, prices.toml, prompts/, themes/) in $XDG_CONFIG_HOME/kernel-workbench,
data (the verdict key, the verifier daemon's sockets) in $XDG_DATA_HOME/kernel-workbench.
Standard library only: the sandbox launcher and the daemon read them too."""
from __future__ import annotations

import os
from pathlib import Path

NAME = "kernel-workbench"


def config_dir() -> Path:
    """$XDG_CONFIG_HOME/kernel-workbench (~/.config/kernel-workbench)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / NAME


def config_file() -> Path:
    """The user's config.toml: one file, each part of the workbench reads its own table."""
    return config_dir() / "config.toml"


def data_dir() -> Path:
    """$XDG_DATA_HOME/kernel-workbench (~/.local/share/kernel-workbench)."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / NAME
