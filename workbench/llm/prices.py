"""Dollars per million tokens, per model; the user's file overrides or extends the built-in table.

The file is TOML, one table per model (prefix match, longest wins, so "o3" covers "o3-2025-04-16"):

    [o3]
    input = 2.0      # $ per 1M input tokens
    output = 8.0     # $ per 1M output tokens (reasoning tokens are billed as output)

Default location: $XDG_CONFIG_HOME/kernel-workbench/prices.toml (~/.config/...), or --prices FILE.
The built-in figures are list prices at the time of writing; check them against your bill.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from workbench.user_dirs import config_dir

BUILTIN: dict[str, tuple[float, float]] = {
    "o3": (2.0, 8.0),
    "o3-pro": (20.0, 80.0),
    "o4-mini": (1.10, 4.40),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4o": (2.50, 10.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.30, 2.50),
}


class PriceError(Exception):
    """An unreadable price file; str() is one line."""


@dataclass
class PriceTable:
    prices: dict[str, tuple[float, float]]

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PriceTable":
        """Built-in prices, overridden by `path` (or the default file when it exists)."""
        prices = dict(BUILTIN)
        file = Path(path) if path else config_dir() / "prices.toml"
        if path or file.is_file():
            try:
                data = tomllib.loads(file.read_text())
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise PriceError(f"{file}: cannot read the price table: {e}") from None
            for model, row in data.items():
                try:
                    prices[model] = (float(row["input"]), float(row["output"]))
                except (TypeError, KeyError, ValueError):
                    raise PriceError(f"{file}: [{model}] needs numeric `input` and `output` "
                                     "($ per million tokens)") from None
        return cls(prices)

    def lookup(self, model: str) -> tuple[float, float] | None:
        matches = [name for name in self.prices if model == name or model.startswith(name + "-")
                   or model.startswith(name + "@") or model.endswith("/" + name)]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(self, model: str, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """Dollars for one call; None when the model has no price or the server gave no usage."""
        price = self.lookup(model)
        if price is None or tokens_in is None or tokens_out is None:
            return None
        return (tokens_in * price[0] + tokens_out * price[1]) / 1e6
