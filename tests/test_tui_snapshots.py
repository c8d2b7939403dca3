"""Screenshots of the main screens at 80x24 and 120x40, compared with committed SVGs.

Regenerate after an intended change: pytest tests/test_tui_snapshots.py --snapshot-update
(then look at the new SVGs before committing them).
"""
from __future__ import annotations

import pytest
from textual.widgets import OptionList, TextArea

from tui_support import small_db, wait_for
from workbench.store import Store
from workbench.tui import queries
from workbench.tui import picker as picker_module
from workbench.tui.app import WorkbenchApp


@pytest.fixture(autouse=True)
def isolated_config(monkeypatch):
    # A fixed path (the help screen shows it); nothing is read from it unless a test writes.
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent/config")
    # The same picture on a GPU box and off one: "no GPU" starts ticked.
    monkeypatch.setattr(picker_module, "gpu_expected", lambda: False)


@pytest.fixture
def user_config(tmp_path, monkeypatch):
    cfg = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    (cfg / "kernel-workbench").mkdir(parents=True)
    return cfg / "kernel-workbench"


@pytest.fixture
def store(tmp_path):
    # Every kernel evaluated: no start-up notice about pending work in the pictures.
    return small_db(tmp_path / "k.db", pending_last_round=False)


def go_to(path, *keys: str):
    """Select the node at the end of `path`, then press `keys`."""
    async def run_before(pilot) -> None:
        tree = pilot.app.main_screen.kernel_tree
        await wait_for(pilot, lambda: pilot.app.started, timeout=5, what="start-up")

        def there() -> bool:
            if tree.cursor_node is not None and tree.cursor_node.data.key == path[-1]:
                return True
            tree.reveal(path)
            return False

        await wait_for(pilot, there, timeout=5, what=str(path[-1]))
        await pilot.pause()
        await pilot.press(*keys)
        # A modal with a text area is ready when the area has the focus (cursor drawn).
        await wait_for(pilot, lambda: not pilot.app.screen.query(TextArea)
                       or isinstance(pilot.app.focused, TextArea), timeout=5, what="focus")
        await pilot.pause()

    return run_before


def test_main_screen_on_a_kernel_80x24(snap_compare, store):
    kernel = store.rows("kernels", "idea_id = 2")[0]["id"]
    assert snap_compare(WorkbenchApp(store), terminal_size=(80, 24),
                        run_before=go_to(queries.path_to_kernel(store, kernel)))


def test_round_table_120x40(snap_compare, store):
    round_id = store.rows("rounds", "n = 2")[0]["id"]
    assert snap_compare(WorkbenchApp(store), terminal_size=(120, 40),
                        run_before=go_to([("problem", 1), ("session", 1), ("round", round_id)]))


def test_light_theme_diff_80x24(snap_compare, store, user_config):
    (user_config / "config.toml").write_text('theme = "workbench-light"\n')
    child = store.db.execute("select id from kernels where parent_id is not null "
                             "order by id limit 1").fetchone()[0]
    assert snap_compare(WorkbenchApp(store), terminal_size=(80, 24),
                        run_before=go_to(queries.path_to_kernel(store, child), "d"))


def test_help_screen_80x24(snap_compare, store):
    assert snap_compare(WorkbenchApp(store), terminal_size=(80, 24),
                        run_before=go_to([("problem", 1), ("session", 1)], "question_mark"))


def test_idea_editor_80x24(snap_compare, store):
    idea = store.rows("ideas", "status = 'implemented'")[0]["id"]
    assert snap_compare(WorkbenchApp(store), terminal_size=(80, 24),
                        run_before=go_to(queries.path_to_idea(store, idea), "i"))


def test_new_session_picker_80x24(snap_compare, tmp_path):
    async def run_before(pilot) -> None:
        # No session for the problem yet: the picker opens on it, with the default settings.
        await wait_for(pilot, lambda: isinstance(pilot.app.focused, OptionList), timeout=5,
                       what="the picker")
        await pilot.pause()

    assert snap_compare(WorkbenchApp(Store(tmp_path / "k.db"), problem="softmax"),
                        terminal_size=(80, 24), run_before=run_before)
