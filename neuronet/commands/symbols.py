"""The candles of a multi-symbol run: ``--symbols`` (or the EA's own ``symbols``), each symbol loaded from
the same source with the same options, plus the symbols its profit and margin are converted through
(``backtests.broker.portfolio``). A synthetic source gives each symbol its own seed from the run's, so a
README example runs offline and gives the same numbers every time."""

from __future__ import annotations

import pandas as pd

from backtests.broker.portfolio import conversion_pairs
from datafeeds import load_candles
from neuronet.commands.errors import CommandError


def symbol_list(text: str | None) -> tuple[str, ...]:
    """``--symbols EURUSD,GBPUSD`` as names; empty, repeated or blank names are one clear line."""
    if text is None:
        return ()
    names = tuple(s.strip().upper() for s in text.split(","))
    if not all(n.replace(".", "").replace("_", "").isalnum() for n in names):
        raise CommandError(f"--symbols {text!r}: expected names separated by commas, like EURUSD,GBPUSD")
    if len(set(names)) != len(names):
        raise CommandError(f"--symbols {text!r}: a symbol is named twice")
    return names


def load_symbols(
    names: tuple[str, ...], source: str, timeframe, start, end, options: dict, currency: str
) -> dict[str, pd.DataFrame]:
    """Every symbol of ``names`` and the conversion pairs they need, from one source."""
    frames: dict[str, pd.DataFrame] = {}
    todo = list(names)
    todo += [p for p in conversion_pairs(names, currency) if p not in todo]
    for i, name in enumerate(todo):
        opts = dict(options)
        if source == "synthetic":
            opts["seed"] = int(opts.get("seed", 0)) + i  # one path per symbol, all from the run's seed
        frames[name] = load_candles(source, name, timeframe, start, end, **opts)
    return frames
