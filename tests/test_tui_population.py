"""The app's bank view, archive view and lesson input, driven through Textual's Pilot."""
from __future__ import annotations

import json

import pytest
from textual.widgets import DataTable, Input, Static

from tui_support import select, small_db, status_line, wait_for
from workbench import bank
from workbench.lessons import lessons_for
from workbench.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.population_views import ArchiveScreen, BankScreen, LessonScreen


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("COLORTERM", raising=False)


@pytest.fixture
def store(tmp_path) -> Store:
    return small_db(tmp_path / "k.db")


def correct_kernels(store: Store) -> list[int]:
    return [r[0] for r in store.db.execute(
        "select k.id from kernels k join evaluations e on e.kernel_id = k.id "
        "where e.status = 'correct' order by k.id")]


async def test_bank_view_filters_diffs_and_picks_a_seed(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(100, 30)) as pilot:
        first = correct_kernels(store)[0]
        await select(pilot, app, [("problem", 1), ("session", 1)])
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BankScreen), what="the bank")
        table = app.screen.query_one(DataTable)
        assert table.row_count == len(correct_kernels(store))
        assert app.screen.highlighted() == bank.search(store)[0]["kernel"]
        # A filter that matches nothing, then one that matches.
        app.screen.query_one(Input).focus()
        await pilot.press(*"family:matmul")
        await wait_for(pilot, lambda: table.row_count == 0, what="an empty filter")
        await pilot.press(*["backspace"] * len("family:matmul"), *"family:reduction")
        await wait_for(pilot, lambda: table.row_count > 0, what="the filter")
        await pilot.press("enter")               # from the filter to the table
        assert table.has_focus
        picked = app.screen.highlighted()
        await pilot.press("enter")               # pick it
        await wait_for(pilot, lambda: not isinstance(app.screen, BankScreen), what="closing")
        settings = json.loads(store.get("sessions", 1)["settings"])
        assert settings["seed_kernels"] == [picked]
        assert picked in correct_kernels(store) and first in correct_kernels(store)


async def test_bank_diff_against_the_selected_kernel(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(100, 30)) as pilot:
        kernel = correct_kernels(store)[-1]
        from workbench.tui import queries
        path = queries.path_to_kernel(store, kernel)
        await select(pilot, app, path)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BankScreen), what="the bank")
        screen = app.screen
        assert screen.against == kernel
        await pilot.press("ctrl+d")
        assert screen.diff is True
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, BankScreen), what="closing")
        assert "seed_kernels" not in json.loads(store.get("sessions", 1)["settings"])


async def test_archive_view_shows_cells_and_seed_reasons(store):
    rounds = store.rows("rounds", "session_id = 1", order_by="n")
    store.update("rounds", rounds[1]["id"], seed_reasons=[
        {"kernel_id": correct_kernels(store)[0], "cell": "memory × smem",
         "reason": "fastest kernel"}])
    app = WorkbenchApp(store)
    async with app.run_test(size=(100, 30)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", 1)])
        await pilot.press("Y")
        await wait_for(pilot, lambda: isinstance(app.screen, ArchiveScreen), what="archive")
        text = str(app.screen.query_one("#archive-text", Static).render())
        assert "Archive of session 1" in text
        n = rounds[1]["n"]
        assert f"round {n}: k{correct_kernels(store)[0]} [memory × smem]: fastest kernel" in text
        assert f"round {rounds[0]['n']}: (no seeds recorded)" in text
        assert "× smem+warp" in text      # a cell read from the kernels' code
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ArchiveScreen), what="closing")


async def test_lesson_input_on_a_kernel(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(100, 30)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", 1)])
        await pilot.press("L")                   # not on a kernel: says why
        assert "select a kernel" in status_line(app)
        kernel = correct_kernels(store)[0]
        from workbench.tui import queries
        await select(pilot, app, queries.path_to_kernel(store, kernel))
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, LessonScreen), what="lesson")
        await pilot.press(*"smem index precompute helped", "enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, LessonScreen), what="saved")
        (lesson,) = lessons_for(store, "reduction")
        assert lesson["text"] == "smem index precompute helped"
        assert lesson["kernel_id"] == kernel
        await pilot.press("L")                   # an empty lesson is refused in one line
        await wait_for(pilot, lambda: isinstance(app.screen, LessonScreen), what="lesson")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "needs some text" in status_line(app), what="refusal")
        assert len(lessons_for(store, "reduction")) == 1
