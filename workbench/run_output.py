"""What `kernel-workbench run` prints: progress lines from engine events, the terminal review of
ideas, and the final table."""
from __future__ import annotations

import threading

import click


class Printer:
    """Turns engine events into progress lines (engine threads call it; one line at a time)."""

    def __init__(self, store):
        self.store = store
        self.lock = threading.Lock()
        self.verifying = 0

    def line(self, text: str) -> None:
        with self.lock:
            click.echo(text)

    def phase(self, label: str, phase: str) -> None:
        self.line(f"  {label}: {phase.replace('_', ' ')}")

    def __call__(self, event) -> None:
        from workbench import events as ev

        if isinstance(event, ev.RoundStarted):
            self.line(f"== round {event.n} ==")
        elif isinstance(event, ev.Progress):
            self.line(f"  {event.text}")
        elif isinstance(event, ev.IdeaAdded):
            idea = self.store.get("ideas", event.idea_id)
            self.line(f"  idea {idea['id']} [{idea['kind'] or '?'}] {_clip(idea['text'], 100)}")
        elif isinstance(event, ev.KernelAdded):
            k = self.store.get("kernels", event.kernel_id)
            what = f"repair {k['attempt']} of kernel {k['parent_id']}" if k["origin"] == "repair" \
                else f"idea {k['idea_id']}"
            self.line(f"  kernel {k['id']} written ({what})")
        elif isinstance(event, ev.EvaluationStarted):
            with self.lock:
                self.verifying += 1
            self.line(f"  kernel {event.kernel_id}: verifying ({self.verifying} in the verifier)")
        elif isinstance(event, ev.VerdictReady):
            with self.lock:
                self.verifying = max(0, self.verifying - 1)
            speed = f" {event.speedup_eager:.2f}x vs eager" if event.speedup_eager else ""
            error = (self.store.latest_evaluation(event.kernel_id) or {}).get("error")
            tail = f": {_clip(error.splitlines()[0], 100)}" if error and event.status != \
                "correct" else ""
            self.line(f"  kernel {event.kernel_id}: {event.status}{speed}{tail}")
        elif isinstance(event, ev.EvaluationsCancelled):
            with self.lock:
                self.verifying = max(0, self.verifying - len(event.kernel_ids))
            ids = ", ".join(map(str, event.kernel_ids))
            self.line(f"  kernel{'s' if len(event.kernel_ids) > 1 else ''} {ids}: interrupted, "
                      "no verdict (verified again on resume)")
        elif isinstance(event, ev.LLMCallDone):
            about = "~" if event.estimated else ""
            cost = f", {about}${event.cost_usd:.4f}" if event.cost_usd is not None else ""
            tokens = (f"{about}{event.tokens_in or 0:,} in / {about}{event.tokens_out or 0:,} out "
                      f"tokens{cost}" if event.tokens_in is not None else "no usage reported")
            if event.estimated:
                tokens += " (estimated: the server reported no usage)"
            error = f" — {event.error}" if event.error else ""
            self.line(f"  llm {event.purpose} #{event.call_id}: {tokens}{error}")
        elif isinstance(event, ev.ReviewNeeded):
            self.line(f"  {len(event.idea_ids)} ideas wait for review")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def terminal_review(store, idea_ids: list[int]) -> None:
    """Approve, edit or veto each idea at the terminal; '+' adds a hand-written idea."""
    from workbench import control

    approve_rest = False
    for idea_id in idea_ids:
        idea = store.get("ideas", idea_id)
        if approve_rest:
            control.approve_idea(store, idea_id)
            continue
        seed = f"kernel {idea['seed_kernel_id']}" if idea["seed_kernel_id"] else "reference"
        click.echo(f"\nidea {idea_id} [{idea['kind'] or '?'}] (from {seed}):\n  {idea['text']}")
        while True:
            choice = click.prompt("  [a]pprove, [e]dit, [v]eto, [A]pprove all, [+] add an idea",
                                  type=click.Choice(["a", "e", "v", "A", "+"]), default="a",
                                  show_choices=False)
            if choice != "+":
                break
            text = click.prompt("  new idea")
            new_id = control.add_idea(store, idea["round_id"], text,
                                      seed_kernel_id=idea["seed_kernel_id"])
            click.echo(f"  added idea {new_id}")
        if choice == "e":
            control.edit_idea(store, idea_id, click.prompt("  text", default=idea["text"]))
        elif choice == "v":
            control.veto_idea(store, idea_id)
        else:
            control.approve_idea(store, idea_id)
            approve_rest = choice == "A"


def print_table(store, session_id: int) -> None:
    from workbench.search import session_table

    rows = session_table(store, session_id)
    click.echo(f"\n{'round':>5} {'idea':>5} {'kernel':>6}  {'status':<14} {'time ms':>10} "
               f"{'speedup':>8}")
    for r in rows:
        time_ms = f"{r['time_ms']:.4f}" if r["time_ms"] is not None else "-"
        speed = f"{r['speedup_eager']:.2f}x" if r["speedup_eager"] else "-"
        status = r["status"] + (" (pruned)" if r["pruned"] else "")
        rnd = "-" if r["round"] is None else r["round"]
        idea = "-" if r["idea"] is None else r["idea"]
        click.echo(f"{rnd:>5} {idea:>5} {r['kernel']:>6}  {status:<14} {time_ms:>10} {speed:>8}")
    best = store.best_kernel(session_id)
    if best:
        speed = f" ({best['speedup_eager']:.2f}x vs eager)" if best["speedup_eager"] else ""
        click.echo(f"best kernel: {best['id']}{speed}")
    else:
        click.echo("best kernel: none verified correct"
                   + (" (compiled without a GPU: nothing was checked)"
                      if any(r["status"] == "unverified" for r in rows) else ""))
