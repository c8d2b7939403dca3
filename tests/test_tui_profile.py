"""The app's profile pane: evidence tables and %-of-peak bars for the selected kernel, the
engineer's choice of evidence and note for its next prompt, and ncu's one-line refusal here."""
from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Static

from test_tui_population import isolated_config  # noqa: F401 - an autouse fixture
from tui_support import select, small_db, wait_for
from workbench.gpu import verdict as verdict_module
from workbench.gpu.verifier import record
from workbench.store import Store
from workbench.tui import queries
from workbench.tui.app import WorkbenchApp
from workbench.tui.profile_view import ProfileScreen
from workbench.tui.tick_box import TickBox

H200 = {"name": "NVIDIA H200", "arch": "sm_90", "sms": 132, "smem_per_sm": 233472,
        "regs_per_sm": 65536, "max_threads_per_sm": 2048, "warp_size": 32}


@pytest.fixture
def store(tmp_path) -> Store:
    store = small_db(tmp_path / "k.db")
    kernel = store.rows("kernels")[0]["id"]
    v = verdict_module.empty("correct")
    v.update(verified=True, time_ms=0.5, ci95_ms=[0.49, 0.51], device=H200,
             ceilings={"bytes_per_s": 4.24e12, "flops_per_s": {"float32": 51.1e12}},
             launches=[{"name": "relu_kernel(float const*, float*, long)", "us": 480.0,
                        "launches": 1, "grid": [8192, 1, 1], "block": [256, 1, 1],
                        "registers": 64, "shared_bytes": 0}])
    record(store, kernel, v)
    return store


async def test_profile_pane_shows_evidence_and_stores_the_choice(store, monkeypatch):
    kernel = store.rows("kernels")[0]["id"]
    app = WorkbenchApp(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel))
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, ProfileScreen), what="the pane")
        screen = app.screen
        launches = screen.query_one("#profile-launches", DataTable)
        assert launches.row_count == 1
        row = launches.get_row_at(0)
        assert row[0] == "relu_kernel" and row[6] == "64" and row[9] == "50% (registers)"
        bars = str(screen.query_one("#profile-bars", Static).render())
        assert "DRAM bandwidth" in bars and "█" in bars
        assert "bottleneck: " in str(screen.query_one("#profile-summary", Static).render())
        # Everything is attached until the engineer chooses.
        assert all(t.value for t in screen.query(TickBox))
        monkeypatch.setattr("workbench.cuda_env.list_gpus", lambda: [])
        await pilot.press("ctrl+r")                  # ncu: one line why not, nothing breaks
        await pilot.pause()
        screen.query_one("#attach-runtime", TickBox).value = False
        screen.query_one("#attach-resources", TickBox).value = False
        screen.query_one(Input).value = "try 128 threads per block"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, ProfileScreen), what="closing")
    choice = store.evidence_choice(kernel)
    assert choice["attached"] == ["bottleneck", "ncu", "change"]
    assert choice["note"] == "try 128 threads per block"


async def test_profile_key_needs_a_kernel(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", 1)])
        await pilot.press("P")
        await pilot.pause()
        assert not isinstance(app.screen, ProfileScreen)
