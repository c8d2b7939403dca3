"""What a new user met in the app (issue 12), driven through Pilot: the filter after pruning,
the footer at 80x24, check boxes, the picker, keys that could not act, state shown wrong,
quitting with work in flight."""
from __future__ import annotations

import time

import pytest
from textual.widgets import Input, OptionList
from textual.widgets._footer import FooterKey

from llm_server import FakeExecutor
from tui_support import labels, select, small_db, status_line, wait_for
from workbench import control, events
from workbench.search import SearchSettings, new_session
from workbench.store import Store
from workbench.tui import picker as picker_module
from workbench.tui import queries
from workbench.tui.app import WorkbenchApp
from workbench.tui.bench_table import BenchTable
from workbench.tui.modals import ConfirmScreen, ExportPrompt
from workbench.tui.picker import ProblemPicker
from workbench.tui.tick_box import TickBox

CORRECT = "import torch\n# VERDICT: correct 2.0\n"


def no_llm(session):
    from workbench.llm import make_provider

    return make_provider(None, None)   # ProviderError: compile-and-time work needs no LLM


def unreachable(session):
    from workbench.llm import make_provider

    return make_provider("openai-compatible", "m", "http://127.0.0.1:9/v1", retries=0,
                         timeout_s=2)


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("COLORTERM", raising=False)
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def store(tmp_path) -> Store:
    return small_db(tmp_path / "k.db")


async def picker_ready(pilot, app) -> None:
    await wait_for(pilot, lambda: isinstance(app.screen, ProblemPicker)
                   and app.screen.query("#rounds"), what="the picker")
    await pilot.pause()


def a_kernel(store: Store, status: str = "correct") -> dict:
    return store.db.execute(
        "select k.id, k.idea_id, k.problem_id, k.session_id from kernels k join evaluations e "
        "on e.kernel_id = k.id where e.status = ? and k.pruned = 0 order by k.id limit 1",
        [status]).fetchone()


def add_repair(store: Store, parent: tuple) -> int:
    kid, idea_id, problem_id, session_id = parent
    return store.add_kernel(problem_id, CORRECT + f"# repair of {kid}\n", session_id=session_id,
                            idea_id=idea_id, parent_id=kid, origin="repair", attempt=1)


# -- 1. crash: prune a kernel with a repair child, expand it, hide dropped -------------------------

async def test_hiding_a_pruned_kernel_with_its_repair_child_does_not_crash(store):
    parent = a_kernel(store)
    child = add_repair(store, parent)
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, parent[0]))
        await pilot.press("x")                    # prunes the kernel and its repair
        await pilot.press("right")                # expand: the repair shows
        tree = app.main_screen.kernel_tree
        await wait_for(pilot, lambda: tree.node_for("kernel", child) is not None,
                       what="the repair child")
        assert tree.node_for("kernel", child).label.plain.startswith("✂")
        await pilot.press("f")
        await pilot.pause()
        assert tree.node_for("kernel", parent[0]) is None
        assert tree.node_for("kernel", child) is None
        await pilot.press("f")
        await pilot.pause()
        assert tree.node_for("kernel", parent[0]) is not None


# -- 6. the footer at 80x24 --------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_footer_always_shows_quit_help_and_palette(store, size):
    app = WorkbenchApp(store)
    async with app.run_test(size=size) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, a_kernel(store)[0]))
        await pilot.pause()
        await pilot.pause()
        keys = {key.action: key for key in app.screen.query(FooterKey)}
        for action in ("app.quit", "app.help", "app.command_palette"):
            action = action.split(".")[1]
            key = next(k for a, k in keys.items() if a.endswith(action))
            region = key.region
            assert region.width > 0 and region.right <= size[0], (action, region)
        footer = app.screen.query_one("Footer")
        assert footer.region.bottom == size[1]
        # The palette key is one of the row, not docked over the last key ("palettet").
        assert not any("-command-palette" in k.classes for k in keys.values())


# -- 7. check boxes, the no-GPU default, the export dialog -------------------------------------------

async def test_tick_boxes_read_without_colour(tmp_path):
    app = WorkbenchApp(Store(tmp_path / "k.db"), problem="softmax",
                       provider_factory=lambda s: None)
    async with app.run_test(size=(80, 24)) as pilot:
        await picker_ready(pilot, app)
        box = app.screen.query_one("#review", TickBox)
        assert box.value and box.render().plain.startswith("[x]")
        box.value = False
        await pilot.pause()
        assert box.render().plain.startswith("[ ]")


@pytest.mark.parametrize("gpu", [True, False])
async def test_no_gpu_defaults_to_what_the_machine_has(tmp_path, monkeypatch, gpu):
    monkeypatch.setattr(picker_module, "gpu_expected", lambda: gpu)
    app = WorkbenchApp(Store(tmp_path / "k.db"), problem="softmax",
                       provider_factory=lambda s: None)
    async with app.run_test(size=(80, 24)) as pilot:
        await picker_ready(pilot, app)
        assert app.screen.query_one("#no-gpu", TickBox).value is (not gpu)


@pytest.mark.parametrize("listed", [[], ["gpu0"]])
def test_a_driver_without_a_gpu_is_no_gpu(monkeypatch, listed):
    """nvidia-smi on the PATH is not a GPU: what it lists decides (asked once per process)."""
    from workbench import cuda_env

    monkeypatch.setattr(cuda_env, "list_gpus", lambda: listed)
    picker_module.gpu_expected.cache_clear()
    try:
        assert picker_module.gpu_expected() is bool(listed)
        monkeypatch.setattr(cuda_env, "list_gpus", lambda: 1 / 0)
        assert picker_module.gpu_expected() is bool(listed)   # cached: nvidia-smi runs once
    finally:
        picker_module.gpu_expected.cache_clear()


async def test_enter_exports_and_the_refusal_names_the_box_not_a_flag(store, tmp_path):
    kernel_id = a_kernel(store, "incorrect")[0]
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel_id))
        await pilot.press("w")
        assert isinstance(app.screen, ExportPrompt)
        app.screen.query_one(Input).value = str(tmp_path / "refused")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("refusing" in n.message for n in app._notifications),
                       what="the refusal")
        message = next(n.message for n in app._notifications if "refusing" in n.message)
        assert "tick 'export even if not verified'" in message
        assert "--allow-unverified" not in message

        await pilot.press("w")
        dialog = app.screen
        dialog.query_one(Input).value = str(tmp_path / "anyway")
        dialog.query_one(TickBox).focus()
        await pilot.press("space")           # space ticks the box...
        assert dialog.query_one(TickBox).value
        await pilot.press("enter")           # ...and Enter on it exports
        await wait_for(pilot, lambda: (tmp_path / "anyway" / "solution.py").exists(),
                       what="the export")


# -- 8. the new-session picker -------------------------------------------------------------------------

async def test_picker_keeps_everything_typed_and_refuses_in_place(tmp_path, monkeypatch):
    from workbench.llm import make_provider

    monkeypatch.setattr(picker_module, "gpu_expected", lambda: True)
    store = Store(tmp_path / "k.db")
    app = WorkbenchApp(store, problem="softmax",
                       provider_factory=lambda s: make_provider(s["provider"], s["model"],
                                                                s.get("base_url")))
    async with app.run_test(size=(80, 24)) as pilot:
        await picker_ready(pilot, app)
        picker = app.screen
        message = picker.query_one("#picker-message")
        picker.query_one("#rounds", Input).value = "7"
        for provider, model, said in (("", "o3", "provider: choose one of"),
                                      ("opnai", "o3", "'opnai' is not one of"),
                                      ("openai", "", "model: openai needs a model name"),
                                      ("openai", "o3", "OPENAI_API_KEY")):
            picker.query_one("#provider", Input).value = provider
            picker.query_one("#model", Input).value = model
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.screen is picker, said
            assert said in str(message.content)
        assert picker.query_one("#rounds", Input).value == "7"
        assert not store.rows("sessions")


async def test_picker_filters_as_you_type_and_remembers_the_llm(store, tmp_path):
    # The latest session's provider, model and base URL are offered again.
    app = WorkbenchApp(store, provider_factory=lambda s: None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.started, what="start-up")
        await pilot.press("N")
        await picker_ready(pilot, app)
        picker = app.screen
        assert picker.query_one("#provider", Input).value == "openai-compatible"
        assert picker.query_one("#model", Input).value == "test-model"
        assert picker.query_one("#base-url", Input).value == "http://127.0.0.1:1/v1"
        await pilot.press(*"layern")
        assert picker.query_one("#filter", Input).value == "layern"
        options = picker.query_one("#problem-list", OptionList)
        assert picker.shown == ["layernorm"] and options.option_count == 1
        await pilot.press("backspace", "backspace", "backspace", "backspace")
        assert "layernorm" in picker.shown and len(picker.shown) > 1


async def test_a_session_that_cannot_start_reopens_the_picker_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(picker_module, "gpu_expected", lambda: True)
    store = Store(tmp_path / "k.db")
    app = WorkbenchApp(store, problem="softmax", provider_factory=lambda s: None)

    def broken(name, *a, **kw):
        from workbench.problems import ProblemError
        raise ProblemError(f"{name}: the problem file cannot be loaded")

    monkeypatch.setattr("workbench.problems.load_problem", broken)
    async with app.run_test(size=(80, 24)) as pilot:
        await picker_ready(pilot, app)
        picker = app.screen
        picker.query_one("#provider", Input).value = "openai"
        picker.query_one("#model", Input).value = "o3"
        picker.query_one("#ideas", Input).value = "6"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ProblemPicker)
                       and app.screen is not picker, what="the picker again")
        again = app.screen
        assert again.query_one("#ideas", Input).value == "6"
        assert again.query_one("#model", Input).value == "o3"
        assert "cannot be loaded" in str(again.query_one("#picker-message").content)


# -- 9. keys that could not act ----------------------------------------------------------------------

async def test_keys_that_cannot_act_say_why_and_j_k_move(store):
    idea_id = store.rows("ideas", "status = 'implemented'")[0]["id"]
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_idea(store, idea_id))
        await pilot.press("x")
        assert status_line(app).startswith("select a kernel first")
        await pilot.press("t")
        assert status_line(app).startswith("select a kernel first")
        tree = app.main_screen.kernel_tree
        await pilot.press("j")
        assert status_line(app).startswith("s1")      # moving clears the reason
        assert tree.cursor_node.data.key != ("idea", idea_id)
        await pilot.press("k")
        assert tree.cursor_node.data.key == ("idea", idea_id)
        # A and m on a kernel: its round has nothing to approve or implement, and says so.
        kernel_id = queries.all_idea_kernels(store, idea_id)[0]["id"]
        await select(pilot, app, queries.path_to_kernel(store, kernel_id))
        await pilot.press("A")
        assert "has no proposed idea to approve" in status_line(app)
        await pilot.press("m")
        assert "no approved idea" in status_line(app)


async def finished_session(tmp_path):
    from workbench.problems import load_problem
    from workbench.search.queries import finish_session

    store = Store(tmp_path / "k.db")
    sid = new_session(store, load_problem("softmax", smoke=False), "openai", "o3", None,
                      SearchSettings(rounds=1, review=True))
    round_id = store.create_round(sid, 0)
    idea = store.add_idea(round_id, "An idea.", status="implemented")
    kernel = store.add_kernel(store.get("sessions", sid)["problem_id"], CORRECT,
                              session_id=sid, idea_id=idea)
    finish_session(store, sid)
    return store, sid, kernel


async def test_a_finished_session_times_kernels_and_takes_more_rounds(tmp_path):
    store, sid, kernel = await finished_session(tmp_path)
    executor = FakeExecutor()
    app = WorkbenchApp(store, executor_factory=lambda: executor, provider_factory=unreachable)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel))
        await pilot.press("g")
        assert "finished its rounds: n adds a round" in status_line(app)
        await pilot.press("t")
        await wait_for(pilot, lambda: store.latest_evaluation(kernel) is not None
                       and not app.main_screen.busy, what="the verdict")
        assert store.latest_evaluation(kernel)["status"] == "correct"
        assert store.get("sessions", sid)["status"] == "finished"
        # n on a finished session adds a round (the fake provider cannot ideate: it stops).
        await select(pilot, app, [("problem", store.get("sessions", sid)["problem_id"]),
                                  ("session", sid)])
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.main_screen.busy, what="the ideation")
        assert store.settings(sid)["rounds"] == 2
        assert store.get("sessions", sid)["status"] != "finished"
    executor.shutdown(cancel=True)


# -- 10. state shown as it is -------------------------------------------------------------------------

async def test_a_repair_appears_under_its_parent_as_it_lands(store):
    parent = a_kernel(store, "incorrect")
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, parent[0]))
        tree = app.main_screen.kernel_tree
        child = add_repair(store, parent)
        app.main_screen.apply_event(events.KernelAdded(child))
        await wait_for(pilot, lambda: tree.node_for("kernel", child) is not None,
                       what="the repair in the tree")
        assert tree.node_for("kernel", child).parent is tree.node_for("kernel", parent[0])


async def test_rounds_tree_and_table_say_what_is_happening(store):
    round_row = store.rows("rounds", "n = 3")[0]
    store.update("rounds", round_row["id"], status="implementing")
    kernel = a_kernel(store, "crashed")
    app = WorkbenchApp(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel[0]))
        # Nothing runs: the round is not "implementing".
        assert not any("implementing" in label for label in labels(app))
        # A crashed kernel verified again is running, in the tree and in the table alike.
        app.main_screen.apply_event(events.EvaluationStarted(kernel[0]))
        await pilot.pause()
        node = app.main_screen.kernel_tree.node_for("kernel", kernel[0])
        assert "running" in node.label.plain
        table = app.main_screen.query_one(BenchTable)
        row = table.get_row(str(kernel[0]))
        assert "running" in str(row[1]) and "crashed" not in str(row[1])


def one_pending_kernel(tmp_path, no_gpu: bool = False) -> tuple[Store, int, int]:
    """A session with round 0 and one kernel without a verdict."""
    from workbench.problems import load_problem

    store = Store(tmp_path / "k.db")
    settings = SearchSettings()
    settings.eval.no_gpu = no_gpu
    sid = new_session(store, load_problem("softmax", smoke=False), "openai", "o3", None,
                      settings)
    store.create_round(sid, 0)
    kernel = store.add_kernel(store.get("sessions", sid)["problem_id"], CORRECT, session_id=sid)
    return store, sid, kernel


async def test_status_says_compiling_not_timing_without_a_gpu(tmp_path):
    store, sid, kernel = one_pending_kernel(tmp_path, no_gpu=True)
    executor = FakeExecutor(delay_s=1.0)
    app = WorkbenchApp(store, executor_factory=lambda: executor, provider_factory=no_llm)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", sid)])
        await pilot.press("R")
        await wait_for(pilot, lambda: app.main_screen.busy, what="the work")
        assert "compiling (no GPU) 1 kernels" in status_line(app)
        assert "timing" not in status_line(app)
        await wait_for(pilot, lambda: not app.main_screen.busy, what="the verdict")
        assert store.latest_evaluation(kernel)["status"] == "unverified"
    executor.shutdown(cancel=True)


# -- 3. quitting with work in flight ----------------------------------------------------------------

async def test_quit_asks_before_discarding_work(tmp_path):
    store, sid, kernel = one_pending_kernel(tmp_path)
    executor = FakeExecutor(delay_s=3.0)
    app = WorkbenchApp(store, executor_factory=lambda: executor, provider_factory=no_llm)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", sid)])
        await pilot.press("R")
        await wait_for(pilot, lambda: app.main_screen.in_flight, what="a kernel in flight")
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        assert "no verdict" in str(app.screen.text)
        await pilot.press("n")                     # stay: the work goes on
        assert not isinstance(app.screen, ConfirmScreen) and app.is_running
        await pilot.press("q")
        await pilot.press("y")
        await pilot.pause()
        assert not app.is_running
    # Interrupted, not crashed: the evaluation stopped without a verdict; R redoes it.
    deadline = time.monotonic() + 10
    while not executor.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r.label for r in executor.cancelled] == [f"kernel {kernel}"]
    executor.shutdown(cancel=True)
    assert store.latest_evaluation(kernel) is None
    assert queries.unevaluated_kernels(store, sid) == [kernel]


async def test_cancelled_kernels_leave_the_queue_and_say_how_to_redo_them(tmp_path):
    store, sid, kernel = one_pending_kernel(tmp_path)
    executor = FakeExecutor(delay_s=5.0)
    app = WorkbenchApp(store, executor_factory=lambda: executor, provider_factory=no_llm)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", sid)])
        await pilot.press("R")
        await wait_for(pilot, lambda: app.main_screen.in_flight, what="a kernel in flight")
        await pilot.press("K")
        await wait_for(pilot, lambda: not app.main_screen.busy, what="the cancel")
        assert app.main_screen.in_flight == set()
        assert store.latest_evaluation(kernel) is None
        await pilot.press("R")    # and R takes it up again
        await wait_for(pilot, lambda: app.main_screen.in_flight == {kernel}, what="R again")
    executor.shutdown(cancel=True)


async def test_quit_without_work_needs_no_answer(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.started, what="start-up")
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


def test_pruned_kernel_is_not_the_best_anywhere(store):
    best = store.best_kernel(1)
    assert best is not None
    control.prune_kernel(store, best["id"], pruned=True)
    assert store.best_kernel(1)["id"] != best["id"]


async def test_search_for_a_kernel_id_past_sqlites_range_is_no_crash(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.started, what="start-up")
        await pilot.press("slash", *("k" + "9" * 25))
        await pilot.pause()
        assert app.is_running and app.screen.hits == []


async def test_a_read_only_database_refuses_changes_in_one_line(store, monkeypatch):
    import os

    import workbench.store_errors as store_errors

    kernel_id = a_kernel(store)[0]
    store.db.close()
    monkeypatch.setattr(store_errors.os, "access",
                        lambda p, mode: mode != os.W_OK and os.path.exists(p))
    readonly = Store(store.path)
    app = WorkbenchApp(readonly)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(readonly, kernel_id))
        await pilot.press("p")
        assert "read-only" in status_line(app) and app.is_running
        assert readonly.get("kernels", kernel_id)["pinned"] == 0


def test_every_binding_has_an_id_for_the_keymap():
    import importlib
    import inspect
    import pkgutil

    import workbench.tui
    from textual.binding import Binding
    from textual.dom import DOMNode

    seen = 0
    for info in pkgutil.iter_modules(workbench.tui.__path__):
        module = importlib.import_module(f"workbench.tui.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                for binding in cls.__dict__.get("BINDINGS", []):
                    assert isinstance(binding, Binding) and binding.id, (cls, binding)
                    seen += 1
    assert seen > 40


async def test_escape_in_the_idea_editor_asks_before_dropping_what_was_typed(store):
    from textual.widgets import TextArea

    from workbench.tui.modals import IdeaEditor

    round_id = store.rows("rounds", "n = 3")[0]["id"]
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", 1), ("round", round_id)])
        await pilot.press("i")
        editor = app.screen
        assert isinstance(editor, IdeaEditor)
        await pilot.press(*"Tile by 64")
        await pilot.press("escape")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")                       # keep editing: nothing lost
        assert app.screen is editor and editor.query_one(TextArea).text == "Tile by 64"
        await pilot.press("escape", "y")
        assert not isinstance(app.screen, (IdeaEditor, ConfirmScreen))
        assert not store.rows("ideas", "text = ?", ["Tile by 64"])
        await pilot.press("i", "escape")             # nothing typed: closes at once
        assert not isinstance(app.screen, (IdeaEditor, ConfirmScreen))


async def test_escape_in_the_picker_keeps_what_was_typed_for_next_time(tmp_path, monkeypatch):
    monkeypatch.setattr(picker_module, "gpu_expected", lambda: True)
    app = WorkbenchApp(Store(tmp_path / "k.db"), problem="softmax",
                       provider_factory=lambda s: None)
    async with app.run_test(size=(80, 24)) as pilot:
        await picker_ready(pilot, app)
        picker = app.screen
        picker.query_one("#model", Input).value = "o3"
        picker.query_one("#rounds", Input).value = "7"
        picker.query_one("#no-gpu", TickBox).value = True
        await pilot.press("escape")
        assert not isinstance(app.screen, ProblemPicker)
        await pilot.press("N")
        await picker_ready(pilot, app)
        again = app.screen
        assert again is not picker
        assert again.query_one("#model", Input).value == "o3"
        assert again.query_one("#rounds", Input).value == "7"
        assert again.query_one("#no-gpu", TickBox).value is True
