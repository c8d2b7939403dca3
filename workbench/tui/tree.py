"""The navigation tree: problem → session → round → idea → kernel (→ hand edits).

Populated lazily: a node's children are queried when it is first expanded, so opening a
database of any size costs one query for the problems. Engine events update only nodes that
are already loaded; anything not loaded yet will be read fresh when it is expanded.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from workbench.store import Store
from workbench.tui import glyphs, queries

Key = tuple[str, int]


@dataclass
class NodeRef:
    kind: str  # problem | session | round | idea | kernel
    id: int
    loaded: bool = False
    session_id: int | None = None  # for kernels: whose "best" to compare with

    @property
    def key(self) -> Key:
        return (self.kind, self.id)


class KernelTree(Tree[NodeRef]):
    """Lazy tree over the store. `in_flight` is shared with the app (kernels being evaluated)."""

    BINDINGS = [
        Binding("right,l", "expand_or_down", "Expand", show=False, id="tree.expand"),
        Binding("left,h", "collapse_or_up", "Collapse", show=False, id="tree.collapse"),
        Binding("j", "cursor_down", "Down", show=False, id="tree.down"),
        Binding("k", "cursor_up", "Up", show=False, id="tree.up"),
    ]

    def __init__(self, store: Store, in_flight: set[int], busy: dict[int, str],
                 **kwargs) -> None:
        super().__init__("kernels.db", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self.store = store
        self.in_flight = in_flight
        self.busy = busy  # session id -> the engine work running for it (shared with the app)
        self.hide_dropped = False  # the filter: hide vetoed ideas and pruned kernels
        self._by_key: dict[Key, TreeNode[NodeRef]] = {}
        self._best: dict[int, int | None] = {}  # session id -> best kernel id

    def on_mount(self) -> None:
        self.root.data = NodeRef("root", 0)
        self.load_children(self.root)

    def action_expand_or_down(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and not node.is_expanded:
            node.expand()
        elif node.children:
            self.move_cursor(node.children[0], animate=False)

    def action_collapse_or_up(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent, animate=False)

    # -- lazy population -------------------------------------------------------------------
    def on_tree_node_expanded(self, event: Tree.NodeExpanded[NodeRef]) -> None:
        if event.node.data and not event.node.data.loaded:
            self.load_children(event.node)

    def load_children(self, node: TreeNode[NodeRef]) -> None:
        """Query and add the children of `node` (or add the missing ones and relabel the rest)."""
        ref = node.data
        if ref is None:
            return
        existing = {child.data.key: child for child in node.children if child.data}
        for child_ref, label, expandable in self._children(ref):
            if self.hide_dropped and self._dropped(child_ref, label):
                continue
            found = existing.get(child_ref.key)
            if found is not None:
                found.set_label(label)
                continue
            child = node.add(label, child_ref, allow_expand=expandable)
            self._by_key[child_ref.key] = child
        ref.loaded = True

    @staticmethod
    def _dropped(ref: NodeRef, label: Text) -> bool:
        return ref.kind in ("idea", "kernel") and label.plain[:1] in ("⊘", "✂")

    def _children(self, ref: NodeRef):
        store = self.store
        if ref.kind == "root":
            for row in queries.problems(store):
                yield (NodeRef("problem", row["id"]),
                       Text.assemble(row["name"], (f" ({row['sessions']})", "dim")),
                       True)
        elif ref.kind == "problem":
            for row in queries.sessions(store, ref.id):
                yield NodeRef("session", row["id"]), glyphs.session_label(row), True
        elif ref.kind == "session":
            for row in queries.rounds(store, ref.id):
                yield (NodeRef("round", row["id"], session_id=ref.id),
                       glyphs.round_label(row, self.round_state(row)), True)
        elif ref.kind == "round":
            for row in queries.ideas(store, ref.id):
                yield (NodeRef("idea", row["id"], session_id=ref.session_id),
                       glyphs.idea_label(row), True)
        elif ref.kind in ("idea", "kernel"):
            rows = (queries.idea_kernels(store, ref.id) if ref.kind == "idea"
                    else queries.kernel_edits(store, ref.id))
            for row in rows:
                session_id = row["session_id"]
                yield (NodeRef("kernel", row["id"], session_id=session_id),
                       glyphs.kernel_label(row, self.in_flight, self.best_of(session_id)),
                       bool(row["edits"]))

    def round_state(self, row: dict) -> str:
        """What a round is doing: its stored phase only while its session's engine works
        (a round left `implementing` by finished work is idle, not implementing)."""
        if row.get("status") in (None, "done") or row["session_id"] not in self.busy:
            return ""
        return row["status"]

    # -- updates from events -----------------------------------------------------------------
    def add_kernel(self, kernel_id: int) -> None:
        """Show a new kernel where it belongs: under its idea, or (a repair, a hand edit)
        under its parent kernel, which opens so the child is seen."""
        row = queries.kernel(self.store, kernel_id)
        if row is None:
            return
        if row["idea_id"] is not None:
            self.sync("idea", row["idea_id"])
        parent = self.node_for("kernel", row["parent_id"]) if row["parent_id"] else None
        if parent is None or self.node_for("kernel", kernel_id) is not None:
            return
        parent_row = queries.kernel(self.store, row["parent_id"])
        if row["idea_id"] not in (None, parent_row["idea_id"]):
            return  # a later round's kernel seeded by the parent: it sits under its own idea
        parent.allow_expand = True
        self.relabel_kernel(row["parent_id"])
        if parent.data.loaded:
            self.load_children(parent)
        if parent.parent is None or parent.parent.is_expanded:
            parent.expand()
    def best_of(self, session_id: int | None) -> int | None:
        if session_id is None:
            return None
        if session_id not in self._best:
            row = self.store.best_kernel(session_id)
            self._best[session_id] = row["id"] if row else None
        return self._best[session_id]

    def node_for(self, kind: str, row_id: int) -> TreeNode[NodeRef] | None:
        return self._by_key.get((kind, row_id))

    def sync(self, kind: str, row_id: int) -> None:
        """Re-read the children of a node if they were loaded (new rows appear, labels update)."""
        node = self.root if kind == "root" else self._by_key.get((kind, row_id))
        if node is not None and node.data is not None and node.data.loaded:
            self.load_children(node)

    def sync_session(self, session_id: int) -> None:
        """Re-read every loaded node of a session (after engine work: idea statuses, labels)."""
        self.sync("session", session_id)
        for node in list(self._by_key.values()):
            ref = node.data
            if ref and ref.kind in ("round", "idea") and ref.session_id == session_id:
                self.sync(ref.kind, ref.id)

    def relabel_kernel(self, kernel_id: int) -> None:
        node = self._by_key.get(("kernel", kernel_id))
        if node is None:
            return
        row = queries.kernel(self.store, kernel_id)
        if row is None:
            return
        node.set_label(glyphs.kernel_label(row, self.in_flight, self.best_of(row["session_id"])))

    def refresh_best(self, session_id: int) -> None:
        """Recompute a session's best kernel; relabel the old and the new best."""
        old = self._best.pop(session_id, None)
        new = self.best_of(session_id)
        for kernel_id in {old, new} - {None}:
            self.relabel_kernel(kernel_id)

    def set_hide_dropped(self, hide: bool) -> None:
        """Filter vetoed ideas and pruned kernels out of (or back into) the loaded tree."""
        self.hide_dropped = hide
        dropped = [node for node in self._by_key.values() if hide and node.data
                   and self._dropped(node.data, node.label)]
        ids = {id(node) for node in dropped}
        for node in dropped:
            # A dropped kernel under a dropped kernel (a repair of a pruned one) goes with
            # its parent: removing it again would fail.
            if not self._below_any(node, ids):
                self._forget(node)
                node.remove()
        for node in [self.root, *self._by_key.values()]:
            if node.data and node.data.loaded:
                self.load_children(node)

    @staticmethod
    def _below_any(node: TreeNode[NodeRef], ids: set[int]) -> bool:
        parent = node.parent
        while parent is not None:
            if id(parent) in ids:
                return True
            parent = parent.parent
        return False

    def _forget(self, node: TreeNode[NodeRef]) -> None:
        for child in node.children:
            self._forget(child)
        if node.data:
            self._by_key.pop(node.data.key, None)

    # -- navigation --------------------------------------------------------------------------
    def reveal(self, path: list[Key]) -> bool:
        """Expand along `path` (from a problem down) and move the cursor to its last node."""
        node = self.root
        for key in path:
            if node.data and not node.data.loaded:
                self.load_children(node)
            child = self._by_key.get(key)
            if child is None:
                return False
            if node is not self.root:
                node.expand()
            node = child
        # Line numbers exist only after the tree rebuilds its lines on the next refresh.
        self.call_after_refresh(self._move_to, node)
        return True

    def _move_to(self, node: TreeNode[NodeRef]) -> None:
        self.move_cursor(node, animate=False)
        self.scroll_to_node(node, animate=False)
