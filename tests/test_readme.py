"""The README's quickstart is two commands, and CI runs the second one; the README stands
alone and documents the config file, the keys, the compile limit and the tests' duration."""
import re
import tomllib
from pathlib import Path

from workbench.gpu.executor import EvalSettings
from workbench.headless import _PROVIDER_FLAGS
from workbench.tui.app import WorkbenchApp
from workbench.tui.main_screen import MainScreen

ROOT = Path(__file__).resolve().parent.parent


def test_quickstart_is_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in section.split("```sh")[1:]]
    commands = [c.split("```")[0].strip() for c in commands]
    assert commands == ["pip install . && kernel-workbench", "pip install -e '.[dev]' && pytest"]
    assert commands[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_stands_alone():
    readme = (ROOT / "README.md").read_text()
    assert "DESIGN" not in readme and "../" not in readme
    for path in re.findall(r"`((?:bench|tests|problems|workbench)/[\w./]+)`", readme):
        assert (ROOT / path).exists(), path


def test_readme_documents_config_keys_limits_and_test_time():
    readme = (ROOT / "README.md").read_text()
    assert "~/.config/kernel-workbench/config.toml" in readme
    block = readme.split("## Configuration", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    config = tomllib.loads(block)
    assert set(config["llm"]) <= {"provider", "model", "base_url", "prices", *_PROVIDER_FLAGS}
    ids = {b.id for b in MainScreen.BINDINGS + WorkbenchApp.BINDINGS}
    assert config["keymap"] and set(config["keymap"]) <= ids
    for binding in MainScreen.BINDINGS + WorkbenchApp.BINDINGS:   # every key is in the table
        key = binding.key.split(",")[0].replace("slash", "/").replace("question_mark", "?")
        assert f"`{key}`" in readme or f" {key}`" in readme or f"`{key} " in readme, \
            f"key {key} ({binding.id}) is missing from the README's key table ('## The app')"
    limit = f"{EvalSettings().compile_timeout_s:.0f} s per kernel build"
    assert limit in readme and "--compile-timeout" in readme
    assert re.search(r"takes\s+about\s+\d+\s+minutes\s+on\s+a\s+2-core\s+machine", readme)
