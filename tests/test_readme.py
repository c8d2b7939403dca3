"""The README's quickstart is two commands, and CI runs the second one."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quickstart_is_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in section.split("```sh")[1:]]
    commands = [c.split("```")[0].strip() for c in commands]
    assert commands == ["pip install . && kernel-workbench", "pip install -e '.[dev]' && pytest"]
    assert commands[1] in (ROOT / ".ci" / "run").read_text().splitlines()
