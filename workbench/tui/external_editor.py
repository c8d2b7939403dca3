"""Edit text in the user's $EDITOR, with the app suspended while it runs."""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from textual.app import App, SuspendNotSupported


def edit_in_editor(app: App, text: str, suffix: str) -> str | None:
    """The edited text, or None when the editor failed; raises OSError if it cannot start."""
    command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
    with tempfile.TemporaryDirectory(prefix="kernel-workbench-") as tmp:
        path = Path(tmp) / f"edit{suffix}"
        path.write_text(text)
        try:
            with app.suspend():
                code = subprocess.call([*command, str(path)])
        except SuspendNotSupported:
            # Headless runs (tests) cannot hand over the terminal; a non-interactive $EDITOR
            # still works there.
            code = subprocess.call([*command, str(path)], stdin=subprocess.DEVNULL)
        return path.read_text() if code == 0 else None
