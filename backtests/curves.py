"""Equity at each bar's worst prices, rebuilt after a run from the broker's position segments and trades.

The terminal tracks equity at every tick, so its equity drawdown sees the low of a long's bar, not only the
close. With bar data each position held in a bar is valued where that bar is worst for it: longs at the low
(bid), shorts at the high plus the spread (ask); all positions at their worst at once, a lower bound when
longs and shorts are open together. A position closed inside a bar counts with the path the pessimistic
rule gives it: closed at the open (a signal, a gap) or at a stop-loss or stop-out, its worst is the exit
itself, already in the balance; closed at a take-profit or at the end of the test, the bar's worst extreme
came first. The result is never above the equity at the close.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def worst_floating(
    held: np.ndarray,
    trades: pd.DataFrame,
    margin_prices: np.ndarray,
    bars: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    contract_size: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``(N,)`` floating profit of one symbol at each bar's worst prices (its profit currency) and the legs
    held at that moment, ``(6, N)`` as ``held``.

    ``held`` (6, N): long lots, long lots x price, short lots, short lots x price, long lots x margin price
    and short lots x margin price of the positions floating over each bar; ``trades``: the symbol's closed
    trades (broker.TRADE_COLUMNS) and ``margin_prices`` the prices their margins were charged at; ``bars``:
    each bar's open and low bid, open and high ask (prices on the symbol's grid, so an exit at the open
    compares exactly).
    """
    opens, lows, open_ask, high_ask = bars
    cs = contract_size
    floating = cs * (held[0] * lows - held[1] + held[3] - held[2] * high_ask)  # longs at the low bid, ...
    held = held.copy()
    for row, margin_price in zip(trades.itertuples(), margin_prices, strict=True):
        long_ = row.type == "buy"
        bar = int(row.exit_bar)
        at_open = row.exit_price == (opens[bar] if long_ else open_ask[bar])
        if row.exit_reason in ("sl", "stop out") or at_open:
            continue  # no excursion beyond the exit inside its bar
        extreme = lows[bar] if long_ else high_ask[bar]
        fall = (extreme - row.exit_price) if long_ else (row.exit_price - extreme)
        floating[bar] += min(0.0, fall) * row.lots * cs
        side = 0 if long_ else 2
        held[side : side + 2, bar] += (row.lots, row.lots * row.entry_price)
        held[4 + side // 2, bar] += row.lots * margin_price
    return floating, held
