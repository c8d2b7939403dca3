"""Prompt templates: Markdown files with $placeholders (string.Template; write $$ for a dollar).

The packaged ones live in workbench/llm/prompts/; a file of the same name in the override
directory (--prompts DIR, else $XDG_CONFIG_HOME/kernel-workbench/prompts/) replaces one.
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path
from string import Template

from workbench.user_dirs import config_dir

NAMES = ("system", "ideate", "implement", "repair", "refine", "conventions", "combine", "judge")


class PromptError(Exception):
    """A template that cannot be read or filled; str() is one line."""


class Prompts:
    def __init__(self, override_dir: str | Path | None = None):
        self.override_dir = Path(override_dir) if override_dir else config_dir() / "prompts"
        if override_dir and not self.override_dir.is_dir():
            raise PromptError(f"{override_dir}: no such prompt directory")

    def path(self, name: str) -> Path:
        user = self.override_dir / f"{name}.md"
        if user.is_file():
            return user
        return Path(str(importlib.resources.files("workbench.llm") / "prompts" / f"{name}.md"))

    def render(self, name: str, **values: object) -> str:
        path = self.path(name)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise PromptError(f"{path}: cannot read the prompt template: {e}") from None
        try:
            return Template(text).substitute({k: str(v) for k, v in values.items()}).strip() + "\n"
        except KeyError as e:
            raise PromptError(f"{path}: unknown placeholder ${e.args[0]} (known: "
                              f"{', '.join('$' + k for k in sorted(values))})") from None
        except ValueError as e:
            raise PromptError(f"{path}: {e} (write $$ for a literal dollar sign)") from None
