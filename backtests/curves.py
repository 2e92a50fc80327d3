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

from typing import Any

import numpy as np
import pandas as pd


def worst_equity(
    segments: list[tuple[int, int, int, float, float]],
    trades: pd.DataFrame,
    bars: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    balance: np.ndarray,
    equity: np.ndarray,
    config: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """``(N,)`` equity at each bar's worst prices and the margin held at that moment.

    ``segments``: (start bar, end bar, side, lots, price) of each position state, floating over bars
    ``[start, end)``; ``trades``: closed trades (broker.TRADE_COLUMNS); ``bars``: each bar's open and low
    bid, open and high ask (prices on the symbol's grid, so an exit at the open compares exactly);
    ``balance``/``equity``: at each bar's close; ``config``: the account (contract size, leverage).
    """
    opens, lows, open_ask, high_ask = bars
    n = len(opens)
    cs, lev = config.contract_size, config.leverage
    floating = np.zeros(n)
    margin_diff = np.zeros(n + 1)
    for start, end, side, lots, price in segments:
        worst = lows[start:end] - price if side > 0 else price - high_ask[start:end]
        floating[start:end] += worst * lots * cs
        margin_diff[start] += lots * cs * price / lev
        margin_diff[end] -= lots * cs * price / lev
    margin = np.cumsum(margin_diff[:n])
    for row in trades.itertuples():
        long_ = row.type == "buy"
        bar = int(row.exit_bar)
        at_open = row.exit_price == (opens[bar] if long_ else open_ask[bar])
        if row.exit_reason in ("sl", "stop out") or at_open:
            continue  # no excursion beyond the exit inside its bar
        extreme = lows[bar] if long_ else high_ask[bar]
        fall = (extreme - row.exit_price) if long_ else (row.exit_price - extreme)
        floating[bar] += min(0.0, fall) * row.lots * cs
        margin[bar] += row.lots * cs * row.entry_price / lev
    return np.minimum(balance + floating, equity), margin
