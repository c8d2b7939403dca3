"""The main screen's human decisions: approve, edit, veto and add ideas; edit, prune, pin,
clear and export kernels. Each is a workbench.control (or export) call; a refusal is one line
in the status line. A mixin of MainScreen."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench import control
from workbench.export import ExportError, export_kernel
from workbench.store import StoreError
from workbench.tui import queries
from workbench.tui.external_editor import edit_in_editor
from workbench.tui.modals import ExportPrompt, IdeaEditor


class DecisionActions:
    def _control(self, fn: Callable[[], Any]) -> Any:
        """Run a control operation; its refusal (or the database's) is one line."""
        try:
            return fn()
        except (control.ControlError, StoreError) as e:
            self.say(str(e))
            return None

    def _idea_id(self) -> int | None:
        ref = self.selected
        if ref is None or ref.kind != "idea":
            self.say("select an idea first")
            return None
        return ref.id

    def _kernel_id(self) -> int | None:
        ref = self.selected
        if ref is None or ref.kind != "kernel":
            self.say("select a kernel first")
            return None
        return ref.id

    def _idea_changed(self, idea_id: int) -> None:
        idea = queries.idea(self.store, idea_id)
        if idea:
            self.kernel_tree.sync("round", idea["round_id"])
        self.show_selection(source=False)
        self.refresh_bindings()

    def action_approve(self) -> None:
        idea_id = self._idea_id()
        if idea_id is not None:
            self._control(lambda: control.approve_idea(self.store, idea_id))
            self._idea_changed(idea_id)

    def action_approve_all(self) -> None:
        round_id = self.round_of(self.selected)
        if round_id is None:
            self.say("select a round, or an idea or a kernel of it")
            return
        proposed = [i["id"] for i in queries.ideas(self.store, round_id)
                    if i["status"] == "proposed"]
        n = queries.round_row(self.store, round_id)["n"]
        if not proposed:
            self.say(f"round {n} has no proposed idea to approve")
            return
        for idea_id in proposed:
            self._control(lambda: control.approve_idea(self.store, idea_id))
        self.kernel_tree.sync("round", round_id)
        self.show_selection(source=False)
        self.notify(f"approved {len(proposed)} idea(s) of round {n}; m implements them")

    def action_veto(self) -> None:
        idea_id = self._idea_id()
        if idea_id is not None:
            self._control(lambda: control.veto_idea(self.store, idea_id))
            self._idea_changed(idea_id)

    def _save_idea_text(self, idea_id: int, text: str | None) -> None:
        if text is None:
            return
        self._control(lambda: control.edit_idea(self.store, idea_id, text))
        self._idea_changed(idea_id)

    def action_edit_idea(self) -> None:
        idea_id = self._idea_id()
        if idea_id is None:
            return
        idea = queries.idea(self.store, idea_id)
        self.app.push_screen(IdeaEditor(f"Edit idea {idea_id}", idea["text"]),
                             lambda text: self._save_idea_text(idea_id, text))

    def action_edit_idea_external(self) -> None:
        idea_id = self._idea_id()
        if idea_id is None:
            return
        text = self._external(queries.idea(self.store, idea_id)["text"], ".md")
        if text is not None:
            self._save_idea_text(idea_id, text)

    def action_add_idea(self) -> None:
        ref = self.selected
        round_id = self.round_of(ref)
        if round_id is None:
            self.say("this session has no round yet: n starts one")
            return
        seed = ref.id if ref and ref.kind == "kernel" else None
        title = f"New idea for round {queries.round_row(self.store, round_id)['n']}" + (
            f", seeded by k{seed}" if seed else "")

        def save(text: str | None) -> None:
            if text is None:
                return
            idea_id = self._control(lambda: control.add_idea(self.store, round_id, text,
                                                             seed_kernel_id=seed))
            if idea_id is not None:
                self.kernel_tree.sync("round", round_id)
                self.kernel_tree.reveal(queries.path_to_idea(self.store, idea_id))

        self.app.push_screen(IdeaEditor(title), save)

    def _external(self, text: str, suffix: str) -> str | None:
        try:
            edited = edit_in_editor(self.app, text, suffix)
        except OSError as e:
            self.say(f"cannot run $EDITOR: {e.strerror or e}")
            return None
        if edited is None:
            self.say("the editor exited with an error; nothing changed")
        elif edited == text:
            self.say("no change")
            return None
        return edited

    def action_edit_kernel(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        source = queries.kernel_source(self.store, kernel_id) or ""
        edited = self._external(source, ".py")
        if edited is None:
            return
        child = self._control(lambda: control.add_child_kernel(self.store, kernel_id, edited))
        if child is None:
            return
        session_id = self.selected.session_id
        self.kernel_tree.add_kernel(child)
        self.kernel_tree.reveal(queries.path_to_kernel(self.store, child))
        self.run_engine(session_id, self._verifying(session_id, f"k{child}"),
                        lambda e: e.evaluate([child]), need_llm=False, reopen=True)

    def _kernel_changed(self, kernel_ids: list[int], session_id: int | None) -> None:
        for kernel_id in kernel_ids:
            self.kernel_tree.relabel_kernel(kernel_id)
        if session_id is not None:
            self.kernel_tree.refresh_best(session_id)
        self.show_selection(source=False)

    def action_prune(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        pruned = not queries.kernel(self.store, kernel_id)["pruned"]
        ids = self._control(lambda: control.prune_kernel(self.store, kernel_id, pruned=pruned))
        if ids is not None:
            self._kernel_changed(ids, self.selected.session_id)
            self.notify(f"{'pruned' if pruned else 'restored'} {len(ids)} kernel(s)")

    def action_pin(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        pinned = not queries.kernel(self.store, kernel_id)["pinned"]
        if self._control(lambda: (control.pin_kernel(self.store, kernel_id, pinned=pinned),
                                  True)[1]) is None:
            return
        self._kernel_changed([kernel_id], None)
        self.notify(f"k{kernel_id} {'pinned: it seeds every round' if pinned else 'unpinned'}")

    def action_clear_flag(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return
        self._control(lambda: control.clear_kernel(self.store, kernel_id))
        self._kernel_changed([kernel_id], self.selected.session_id)

    def action_export(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is None:
            return

        def export(out_dir: str, allow_unverified: bool):
            try:
                return export_kernel(self.store, kernel_id, out_dir,
                                     allow_unverified=allow_unverified)
            except ExportError as e:
                if e.overridable:
                    raise ExportError(f"{e}; tick 'export even if not verified' to export "
                                      "it anyway") from None
                raise

        def chosen(answer: tuple[str, bool] | None) -> None:
            if answer is not None:
                self.app.run_in_thread(f"export k{kernel_id}", lambda: export(*answer), None)

        self.app.push_screen(ExportPrompt(kernel_id, f"exports/k{kernel_id}"), chosen)
