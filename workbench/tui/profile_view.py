"""The app's profile pane for the selected kernel: its hardware evidence as tables with bars for
% of peak, Nsight Compute on demand, and what the next prompt of its lineage is given: which
kinds of evidence are attached and a free-text note (stored; the LLM call records what it got).

MainScreen mixes in ProfileActions and lists PROFILE_BINDINGS; everything else is here.
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static

from workbench.evidence import render, report
from workbench.store import Store
from workbench.tui.tick_box import TickBox

PROFILE_BINDINGS = [
    Binding("P", "profile", "Profile", id="profile",
            tooltip="The kernel's hardware evidence; choose what its next prompt is given"),
]
KIND_LABELS = {"bottleneck": "bottleneck class", "runtime": "launch table (regs, occupancy)",
               "resources": "build resources", "ncu": "Nsight Compute figures",
               "change": "change from its parent"}


class ProfileScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ProfileScreen #dialog { width: 96%; max-width: 160; height: 92%; }
    ProfileScreen #profile-scroll { height: 1fr; }
    ProfileScreen DataTable { height: auto; max-height: 10; }
    ProfileScreen #attach { height: auto; }
    ProfileScreen TickBox { width: auto; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="profile.close"),
        Binding("ctrl+s", "save", "Save for next prompt", id="profile.save", priority=True),
        Binding("ctrl+r", "run_ncu", "Run ncu", id="profile.ncu", priority=True),
    ]

    def __init__(self, store: Store, kernel_id: int) -> None:
        super().__init__()
        self.store = store
        self.kernel_id = kernel_id

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Kernel k{self.kernel_id}: hardware evidence", id="dialog-title")
            with VerticalScroll(id="profile-scroll"):
                yield Static(id="profile-summary")
                yield DataTable(id="profile-launches", zebra_stripes=True, cursor_type="none")
                yield Static(id="profile-bars")
                yield DataTable(id="profile-ncu", zebra_stripes=True, cursor_type="none")
            yield Label("Attach to the next prompt of this lineage:")
            with Horizontal(id="attach"):
                for kind in render.KINDS:
                    yield TickBox(KIND_LABELS[kind], id=f"attach-{kind}")
            yield Input(placeholder="a note for the next prompt (e.g. the tail block idles)",
                        id="profile-note")
            with Horizontal(classes="buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Run ncu (ctrl+r)", id="ncu")
                yield Button("Close (esc)", id="close")

    def on_mount(self) -> None:
        choice = self.store.evidence_choice(self.kernel_id)
        attached = choice["attached"] if choice else list(render.KINDS)
        for kind in render.KINDS:
            self.query_one(f"#attach-{kind}", TickBox).value = kind in attached
        self.query_one(Input).value = (choice or {}).get("note") or ""
        self.fill()

    def fill(self) -> None:
        p = self.store.kernel_profiles(self.kernel_id)
        lines = [f"{kind}: {p[kind]['summary']}" for kind in ("bottleneck", "change", "resources")
                 if kind in p] or ["no evidence yet: evaluate the kernel on a GPU (t)"]
        self.query_one("#profile-summary", Static).update("\n".join(lines))
        launches = self.query_one("#profile-launches", DataTable)
        launches.clear(columns=True)
        rt = p.get("runtime", {}).get("data")
        if rt:
            launches.add_columns(*render.LAUNCH_COLUMNS)
            for row in render.launch_rows(rt, width=36):
                launches.add_row(*row)
        rows = report.peak_rows(p)
        width = max((len(label) for label, _ in rows), default=0)
        self.query_one("#profile-bars", Static).update(
            "\n".join(f"{label:<{width}}  {report.bar(v)}" for label, v in rows))
        table = self.query_one("#profile-ncu", DataTable)
        table.clear(columns=True)
        data = p.get("ncu", {}).get("data")
        if data:
            lines = report.ncu_table(data)
            header = [c.strip() for c in lines[1].strip("|").split("|")]
            table.add_columns(*header)
            for line in lines[2:2 + len(data["kernels"])]:
                table.add_row(*[c.strip() for c in line.strip("|").split("|")])

    def chosen(self) -> tuple[list[str], str]:
        return ([k for k in render.KINDS if self.query_one(f"#attach-{k}", TickBox).value],
                self.query_one(Input).value.strip())

    def action_save(self) -> None:
        attached, note = self.chosen()
        self.store.set_evidence_choice(self.kernel_id, attached, note)
        self.notify(f"k{self.kernel_id}: the next prompt from it gets "
                    f"{', '.join(attached) or 'no evidence'}" + (" and your note" if note else ""))
        self.dismiss(None)

    def action_run_ncu(self) -> None:
        from workbench import cuda_env
        from workbench.evidence import nsight
        from workbench.gpu.pool import default_cache_dir

        gpus = [g.index for g in cuda_env.list_gpus()]
        why = nsight.unavailable(gpus)
        if why:
            self.notify(f"ncu: {why}", severity="warning")
            return
        self.notify(f"k{self.kernel_id}: profiling with Nsight Compute ...")

        def work() -> None:
            result = nsight.profile_kernel(self.store, self.kernel_id, default_cache_dir(),
                                           gpus[0])
            self.app.call_from_thread(self._profiled, result.get("error"))

        self.run_worker(work, thread=True, group="ncu", exit_on_error=False)

    def _profiled(self, error: str | None) -> None:
        if error:
            self.notify(error, severity="warning")
        self.fill()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {"save": self.action_save, "ncu": self.action_run_ncu,
         "close": self.action_close}[event.button.id]()

    def action_close(self) -> None:
        self.dismiss(None)


class ProfileActions:
    store: Store

    def action_profile(self) -> None:
        kernel_id = self._kernel_id()
        if kernel_id is not None:
            self.app.push_screen(ProfileScreen(self.store, kernel_id))
