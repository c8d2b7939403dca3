"""The command palette (ctrl+p): every workbench action, by name, with its current key."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class WorkbenchCommands(Provider):
    """Lists the main screen's and the app's bindings; keys reflect the user's keymap."""

    def _commands(self):
        app = self.app
        main = app.main_screen
        for node, bindings in ((main, main.BINDINGS), (app, app.BINDINGS)):
            for binding in bindings:
                key = app.keymap.get(binding.id, binding.key).split(",")[0]
                name = f"{binding.description}  ({key})"
                yield name, partial(app.run_action, binding.action, node), binding.tooltip

    async def discover(self) -> Hits:
        for name, command, help_text in self._commands():
            yield DiscoveryHit(name, command, help=help_text or None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, command, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, help=help_text or None)
