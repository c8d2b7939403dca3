"""The command palette (ctrl+p): every workbench action, by name, with its current key."""
from __future__ import annotations

import inspect
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


async def _invoke(node, action: str) -> None:
    """Call the action directly: the footer hides actions that don't fit the selection, but
    from the palette each one still runs and says in one line what it needs."""
    result = getattr(node, f"action_{action}")()
    if inspect.isawaitable(result):
        await result


class WorkbenchCommands(Provider):
    """Lists the main screen's and the app's bindings; keys reflect the user's keymap."""

    def _commands(self):
        app = self.app
        main = app.main_screen
        for node, bindings in ((main, main.BINDINGS), (app, app.BINDINGS)):
            for binding in bindings:
                name = f"{binding.description}  ({app.key_for(binding)})"
                yield name, partial(_invoke, node, binding.action), binding.tooltip

    async def discover(self) -> Hits:
        for name, command, help_text in self._commands():
            yield DiscoveryHit(name, command, help=help_text or None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, command, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, help=help_text or None)
