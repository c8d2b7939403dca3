"""The workbench app driven through Textual's Pilot against temporary databases."""
from __future__ import annotations

import json
import re

import pytest
from textual.widgets import Input, TextArea

from llm_server import FakeExecutor, FakeLLMServer, Reply
from tui_support import labels, select, small_db, status_line, wait_for
from workbench.llm import make_provider
from workbench.search import SearchSettings
from workbench.store import Store
from workbench.tui import queries
from workbench.tui.app import WorkbenchApp
from workbench.tui.bench_table import BenchTable
from workbench.tui.commands import WorkbenchCommands
from workbench.tui.modals import ExportPrompt, IdeaEditor
from workbench.tui import picker as picker_module
from workbench.tui.picker import ProblemPicker
from workbench.tui.source_pane import SourcePane


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    """No user config or themes leak in; tests write their own."""
    cfg = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    monkeypatch.delenv("COLORTERM", raising=False)
    return cfg / "kernel-workbench"


@pytest.fixture
def store(tmp_path) -> Store:
    return small_db(tmp_path / "k.db")


def first_kernel(store: Store, status: str = "correct") -> int:
    row = store.db.execute(
        "select k.id from kernels k join evaluations e on e.kernel_id = k.id "
        "where e.status = ? and k.pruned = 0 order by k.id limit 1", [status]).fetchone()
    return row[0]


async def test_opens_on_latest_session_with_lazy_tree(store):
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        tree = app.main_screen.kernel_tree
        assert tree.cursor_node.data.key == ("session", 1)
        # Rounds are loaded (the session is expanded); no idea or kernel node exists yet.
        kinds = {key[0] for key in tree._by_key}
        assert kinds == {"problem", "session", "round"}
        assert any(label.startswith("round 2") for label in labels(app))
        # Down to round 0, expand with right arrow, then its first idea and kernel.
        await pilot.press("down", "right", "down", "right", "down")
        assert tree.cursor_node.data.kind == "kernel"
        kernel_id = tree.cursor_node.data.id
        pane = app.main_screen.query_one(SourcePane)
        assert pane.border_title == f"k{kernel_id} · CUDA"
        assert "__global__" in pane.shown
        table = app.main_screen.query_one(BenchTable)
        assert table.row_count == 2 and table.border_title.startswith("idea ")


async def test_source_toggles_python_and_diff(store):
    app = WorkbenchApp(store)
    child = store.db.execute("select id, parent_id from kernels where parent_id is not null "
                             "order by id limit 1").fetchone()
    async with app.run_test(size=(100, 30)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, child[0]))
        pane = app.main_screen.query_one(SourcePane)
        await pilot.press("c")
        assert pane.border_title == f"k{child[0]} · Python"
        assert "class ModelNew" in pane.shown
        await pilot.press("d")
        assert pane.border_title == f"k{child[0]} · Python · diff vs k{child[1]}"
        text = pane.shown
        assert f"--- k{child[1]}" in text and f"+++ k{child[0]}" in text


async def test_table_sorts_by_speedup(store):
    app = WorkbenchApp(store)
    round_id = store.rows("rounds", "n = 2")[0]["id"]
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, app, [("problem", 1), ("session", 1), ("round", round_id)])
        table = app.main_screen.query_one(BenchTable)
        await pilot.press("s")  # first sort: speedup vs eager, best first
        speedups = [table._values[row.value]["eager"] for row in
                    (table.coordinate_to_cell_key((i, 0)).row_key
                     for i in range(table.row_count))]
        present = [s for s in speedups if s is not None]
        assert present == sorted(present, reverse=True)
        assert speedups[: len(present)] == present  # missing values last


async def test_veto_approve_and_edit_an_idea(store):
    round_id = store.rows("rounds", "n = 2")[0]["id"]
    idea_a = store.add_idea(round_id, "Try a persistent kernel.", status="proposed")
    idea_b = store.add_idea(round_id, "Use tensor cores.", status="proposed")
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_idea(store, idea_a))
        await pilot.press("v")
        assert store.get("ideas", idea_a)["status"] == "vetoed"
        assert app.main_screen.kernel_tree.node_for("idea", idea_a).label.plain.startswith("⊘")

        await select(pilot, app, queries.path_to_idea(store, idea_b))
        await pilot.press("e")
        assert isinstance(app.screen, IdeaEditor)
        app.screen.query_one(TextArea).text = "Use tensor cores with TF32 off."
        await pilot.press("ctrl+s")
        assert store.get("ideas", idea_b)["status"] == "edited"
        assert store.get("ideas", idea_b)["text"] == "Use tensor cores with TF32 off."

        # Editing an implemented idea is refused by core in one line, not a traceback.
        implemented = store.rows("ideas", "status = 'implemented'")[0]["id"]
        await select(pilot, app, queries.path_to_idea(store, implemented))
        await pilot.press("e")
        app.screen.query_one(TextArea).text = "something else"
        await pilot.press("ctrl+s")
        assert store.get("ideas", implemented)["status"] == "implemented"
        assert "already has implementations" in status_line(app)


async def test_add_idea_seeded_by_the_selected_kernel(store):
    kernel_id = first_kernel(store)
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel_id))
        await pilot.press("i")
        app.screen.query_one(TextArea).text = "Fuse the scale into the exp."
        await pilot.press("ctrl+s")
        await pilot.pause()
        idea = store.rows("ideas", "text = ?", ["Fuse the scale into the exp."])[0]
        assert idea["author"] == "human" and idea["seed_kernel_id"] == kernel_id
        assert app.main_screen.kernel_tree.cursor_node.data.key == ("idea", idea["id"])


async def test_prune_pin_and_export(store, tmp_path):
    kernel_id = first_kernel(store)
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel_id))
        node = app.main_screen.kernel_tree.node_for("kernel", kernel_id)

        await pilot.press("x")
        assert store.get("kernels", kernel_id)["pruned"] == 1
        assert node.label.plain.startswith("✂")
        await pilot.press("x")
        assert store.get("kernels", kernel_id)["pruned"] == 0

        await pilot.press("p")
        assert store.get("kernels", kernel_id)["pinned"] == 1
        assert "◆" in node.label.plain

        out = tmp_path / "export"
        await pilot.press("w")
        assert isinstance(app.screen, ExportPrompt)
        app.screen.query_one(Input).value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: (out / "solution.py").exists(), what="the export")
        await app.workers.wait_for_complete()
        assert store.rows("exports", "kernel_id = ?", [kernel_id])

        # An unverified kernel is refused with core's one-line reason.
        pending = store.db.execute("select k.id from kernels k where not exists (select 1 "
                                   "from evaluations e where e.kernel_id = k.id)").fetchone()[0]
        await select(pilot, app, queries.path_to_kernel(store, pending))
        await pilot.press("w")
        app.screen.query_one(Input).value = str(tmp_path / "refused")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("never compiled (it has never been evaluated)" in n.message
                   for n in app._notifications)
        assert not (tmp_path / "refused").exists()


async def test_state_survives_reopening(store):
    kernel_id = first_kernel(store)
    app = WorkbenchApp(store)
    async with app.run_test() as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel_id))
        await pilot.press("p")
    reopened = WorkbenchApp(Store(store.path))
    async with reopened.run_test() as pilot:
        await select(pilot, reopened, queries.path_to_kernel(store, kernel_id))
        assert "◆" in reopened.main_screen.kernel_tree.cursor_node.label.plain
        # Kernels without a verdict (in flight at the last quit) are announced, with the key.
        assert any("no verdict" in n.message and "R" in n.message
                   for n in reopened._notifications)


async def test_search_jumps_to_a_kernel(store):
    kernel_id = first_kernel(store, "incorrect")
    app = WorkbenchApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("slash")
        await pilot.press(*f"k{kernel_id}")
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert app.main_screen.kernel_tree.cursor_node.data.key == ("kernel", kernel_id)


async def test_keymap_and_theme_from_config(store, isolated_config):
    isolated_config.mkdir(parents=True)
    (isolated_config / "config.toml").write_text(
        'theme = "workbench-light"\n[keymap]\nveto = "ctrl+x"\n')
    (isolated_config / "themes").mkdir()
    (isolated_config / "themes" / "mine.toml").write_text(
        'name = "mine"\nprimary = "#ff0000"\ndark = true\n')
    round_id = store.rows("rounds", "n = 1")[0]["id"]
    idea_id = store.add_idea(round_id, "An idea to veto.", status="proposed")
    app = WorkbenchApp(store)
    async with app.run_test() as pilot:
        assert app.theme == "workbench-light"
        assert "mine" in app.available_themes
        await select(pilot, app, queries.path_to_idea(store, idea_id))
        await pilot.press("v")  # remapped away: does nothing now
        assert store.get("ideas", idea_id)["status"] == "proposed"
        await pilot.press("ctrl+x")
        assert store.get("ideas", idea_id)["status"] == "vetoed"
        await pilot.press("T")
        assert app.theme != "workbench-light"


async def test_bad_config_is_one_line_not_a_crash(store, isolated_config):
    isolated_config.mkdir(parents=True)
    (isolated_config / "config.toml").write_text("theme = [unclosed\n")
    (isolated_config / "themes").mkdir()
    (isolated_config / "themes" / "broken.toml").write_text('name = "broken"\n')
    app = WorkbenchApp(store)
    async with app.run_test() as pilot:
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any("config.toml" in m for m in messages)
        assert any("broken.toml" in m and "primary" in m for m in messages)
        assert app.theme == "workbench-dark"


async def test_palette_lists_every_action_with_its_key(store):
    app = WorkbenchApp(store)
    async with app.run_test() as pilot:
        provider = WorkbenchCommands(app.main_screen)
        names = [hit.text async for hit in provider.discover()]
        for binding in app.main_screen.BINDINGS + app.BINDINGS:
            assert any(name.startswith(binding.description) for name in names), binding.id
        assert "Veto  (v)" in names
        # Choosing a command runs the action (toggles the filter here).
        hits = [h async for h in provider.search("Hide dropped")]
        assert hits and str(hits[0].text).startswith("Hide dropped")
        await hits[0].command()
        await pilot.pause()
        assert app.main_screen.kernel_tree.hide_dropped


async def test_actions_out_of_context_say_what_to_do(store):
    app = WorkbenchApp(store)
    async with app.run_test() as pilot:
        await pilot.pause()
        # The session is selected: kernel and idea actions are not in the footer...
        footer = {b.binding.id for b in app.main_screen.active_bindings.values()}
        assert "prune" not in footer and "approve" not in footer and "ideate" in footer
        # ...and from the palette they answer with one line.
        provider = WorkbenchCommands(app.main_screen)
        (hit,) = [h async for h in provider.search("Prune")]
        await hit.command()
        await pilot.pause()
        assert status_line(app).startswith("select a kernel first")


IDEAS = json.dumps([
    {"kind": "memory", "idea": "Use float4 vectorized loads and stores."},
    {"kind": "parallelism", "idea": "Use a grid-stride loop with 512 threads per block."},
])


def llm_script(prompt: str, request) -> Reply:
    if "Propose" in prompt:
        return Reply(text=f"```json\n{IDEAS}\n```")
    return Reply(text="```python\nimport torch\nimport torch.nn as nn\n# VERDICT: correct 2.5\n"
                      "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                      "        return x\n```")


async def test_ideate_review_and_implement_with_the_llm_server(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    from workbench.problems import load_problem
    from workbench.search import SearchSettings, new_session

    store = Store(tmp_path / "k.db")
    with FakeLLMServer(responder=llm_script) as server:
        session_id = new_session(store, load_problem("softmax", smoke=False), "openai", "o3",
                                 server.openai_url,
                                 SearchSettings(review=True, ideas=2, impls=1, repairs=0))
        executor = FakeExecutor()
        app = WorkbenchApp(store, executor_factory=lambda: executor,
                           provider_factory=lambda s: make_provider(
                               s["provider"], s["model"], server.openai_url, timeout_s=5,
                               retries=0))
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await pilot.press("n")
            await wait_for(pilot, lambda: len(store.rows("ideas")) == 2
                           and not app.main_screen.busy, what="ideas from the LLM")
            ideas = store.rows("ideas")
            assert {i["status"] for i in ideas} == {"proposed"}
            # The new round expanded itself; the ideas are in the tree as they landed.
            assert any("float4" in label for label in labels(app))
            assert "$" in app.main_screen.query_one("#status").content.plain

            await select(pilot, app, queries.path_to_idea(store, ideas[0]["id"]))
            await pilot.press("a")
            await select(pilot, app, queries.path_to_idea(store, ideas[1]["id"]))
            await pilot.press("v")
            await pilot.press("m")
            await wait_for(pilot, lambda: store.rows("evaluations")
                           and not app.main_screen.busy, what="implementation and verdict")
            (kernel,) = store.rows("kernels")
            assert kernel["idea_id"] == ideas[0]["id"]
            assert store.latest_evaluation(kernel["id"])["speedup_eager"] == 2.5
            await pilot.pause()
            await select(pilot, app, queries.path_to_kernel(store, kernel["id"]))
            assert re.match(r"★ k\d+ 2\.50x", app.main_screen.kernel_tree.cursor_node.label.plain)
            assert app.main_screen.in_flight == set()
            assert sum("Propose" in r.prompt for r in server.requests) == 1
        executor.shutdown(cancel=True)


async def test_edit_kernel_in_editor_becomes_an_evaluated_child(store, tmp_path, monkeypatch):
    kernel_id = first_kernel(store)
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "\\n# VERDICT: correct 9.0\\n" >> "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    executor = FakeExecutor()
    app = WorkbenchApp(store, executor_factory=lambda: executor,
                       provider_factory=lambda s: make_provider(None, None))
    async with app.run_test() as pilot:
        await select(pilot, app, queries.path_to_kernel(store, kernel_id))
        await pilot.press("o")
        await wait_for(pilot, lambda: not app.main_screen.busy
                       and store.rows("kernels", "parent_id = ? and origin = 'human'",
                                      [kernel_id]), what="the edited kernel")
        (child,) = store.rows("kernels", "parent_id = ? and origin = 'human'", [kernel_id])
        await wait_for(pilot, lambda: store.latest_evaluation(child["id"]) is not None,
                       what="its verdict")
        assert store.latest_evaluation(child["id"])["speedup_eager"] == 9.0
        await pilot.pause()
        node = app.main_screen.kernel_tree.node_for("kernel", child["id"])
        assert node is not None and node.parent.data.key == ("kernel", kernel_id)
        assert node.label.plain.startswith("★")
    executor.shutdown(cancel=True)


async def test_cancel_stops_work_in_flight_and_the_session_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    from workbench.problems import load_problem
    from workbench.search import SearchSettings, new_session

    def slow(prompt: str, request) -> Reply:
        return Reply(text=f"```json\n{IDEAS}\n```", delay_s=1.5)

    store = Store(tmp_path / "k.db")
    with FakeLLMServer(responder=slow) as server:
        session_id = new_session(store, load_problem("softmax", smoke=False), "openai", "o3",
                                 server.openai_url, SearchSettings(review=True, ideas=2))
        executor = FakeExecutor()
        app = WorkbenchApp(store, executor_factory=lambda: executor,
                           provider_factory=lambda s: make_provider(
                               s["provider"], s["model"], server.openai_url, timeout_s=5,
                               retries=0))
        async with app.run_test() as pilot:
            await wait_for(pilot, lambda: app.started, what="start-up")
            await pilot.press("n")
            await wait_for(pilot, lambda: app.main_screen.busy, what="work in flight")
            assert "ideating" in app.main_screen.query_one("#status").content.plain
            await pilot.press("K")
            await wait_for(pilot, lambda: not app.main_screen.busy, what="the cancel")
            assert store.get("sessions", session_id)["status"] == "stopped"
            assert any("stopped" in n.message for n in app._notifications)
        executor.shutdown(cancel=True)


async def test_idea_in_editor_and_the_filter(store, tmp_path, monkeypatch):
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "Split the row across two blocks." > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    round_id = store.rows("rounds", "n = 3")[0]["id"]
    idea_id = store.add_idea(round_id, "A rough idea.", status="proposed")
    vetoed = store.rows("ideas", "status = 'vetoed'")[0]["id"]
    app = WorkbenchApp(store)
    async with app.run_test() as pilot:
        await select(pilot, app, queries.path_to_idea(store, idea_id))
        await pilot.press("E")
        assert store.get("ideas", idea_id)["text"] == "Split the row across two blocks."
        assert store.get("ideas", idea_id)["status"] == "edited"

        tree = app.main_screen.kernel_tree
        await select(pilot, app, queries.path_to_idea(store, vetoed))
        await pilot.press("f")
        assert tree.node_for("idea", vetoed) is None
        assert tree.node_for("idea", idea_id) is not None
        await pilot.press("f")
        assert tree.node_for("idea", vetoed) is not None


async def open_picker(pilot, app) -> ProblemPicker:
    await wait_for(pilot, lambda: isinstance(app.screen, ProblemPicker), timeout=5,
                   what="the picker")
    await pilot.pause()
    return app.screen


async def fill(pilot, picker: ProblemPicker, **values: str) -> None:
    """Type each value into its (emptied) field, as a person would."""
    for key, value in values.items():
        box = picker.query_one(f"#{key}", Input)
        box.focus()
        box.value = ""
        await pilot.press(*value)


async def test_picker_search_settings_reach_the_new_session(tmp_path, monkeypatch):
    monkeypatch.setattr(picker_module, "gpu_expected", lambda: True)  # "no GPU" starts off
    store = Store(tmp_path / "k.db")
    # A library problem without a session opens the picker on it; no key needed for the LLM.
    app = WorkbenchApp(store, problem="softmax", provider_factory=lambda session: None)
    async with app.run_test(size=(80, 24)) as pilot:
        picker = await open_picker(pilot, app)
        await fill(pilot, picker, provider="openai", model="o3", rounds="3", ideas="2",
                   impls="1", top_k="2", repairs="0", budget_usd="2.5",
                   budget_tokens="100000", atol="1e-3", rtol="0.01",
                   verify_workers="3", compile_timeout_s="600")
        await pilot.click("#review")   # on by default in the workbench: turn it off
        await pilot.click("#no-gpu")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: store.rows("sessions"), what="the session")
        (session,) = store.rows("sessions")
        assert (session["provider"], session["model"]) == ("openai", "o3")
        settings = store.settings(session["id"])
        assert {k: settings[k] for k in ("rounds", "ideas", "impls", "top_k", "repairs",
                                         "review", "budget_usd", "budget_tokens")} == {
            "rounds": 3, "ideas": 2, "impls": 1, "top_k": 2, "repairs": 0, "review": False,
            "budget_usd": 2.5, "budget_tokens": 100000}
        assert (settings["eval"]["atol"], settings["eval"]["rtol"]) == (1e-3, 0.01)
        assert settings["eval"]["compile_timeout_s"] == 600
        assert settings["eval"]["verify_workers"] == 3
        assert settings["eval"]["no_gpu"] is True
        # What the form does not show keeps the engine's defaults.
        assert settings["history_limit"] == SearchSettings().history_limit
        assert settings["eval"]["trials"] == SearchSettings().eval.trials


async def test_picker_refuses_a_bad_value_in_place(tmp_path):
    store = Store(tmp_path / "k.db")
    app = WorkbenchApp(store, problem="softmax", provider_factory=lambda session: None)
    async with app.run_test(size=(80, 24)) as pilot:
        picker = await open_picker(pilot, app)
        message = picker.query_one("#picker-message")
        for key, value, said in (("rounds", "0", "rounds R: must be at least 1"),
                                 ("repairs", "-1", "repairs: must not be negative"),
                                 ("budget_usd", "abc", "budget $: 'abc' is not a number"),
                                 ("budget_tokens", "1.5",
                                  "tokens: '1.5' is not a whole number")):
            await fill(pilot, picker, provider="openai", model="o3", **{key: value})
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.screen is picker
            assert message.content == said
            assert app.focused is picker.query_one(f"#{key}", Input)
            await fill(pilot, picker, **{key: ""})   # blank: back to the default
        assert not store.rows("sessions")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: store.rows("sessions"), what="the session")
        assert store.settings(store.rows("sessions")[0]["id"])["rounds"] == \
            SearchSettings().rounds
