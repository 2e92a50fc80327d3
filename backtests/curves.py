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

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


def worst_floating(
    floating: np.ndarray,
    legs_at: Callable[[np.ndarray], np.ndarray],
    trades: ClosedTrades,
    bars: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    contract_size: float,
) -> tuple[np.ndarray, WorstLegs]:
    """``(N,)`` floating profit of one symbol at each bar's worst prices (its profit currency) and the legs
    held at that moment where they differ from the legs held over the bar (``WorstLegs``: the bars where a
    trade closed inside its bar still counts, and the legs there); everywhere else they are the held ones,
    so the margin held at the worst prices is the margin at the close but at those few bars.

    ``floating`` (N,): the positions floating over each bar valued there, longs at the bar's low bid and
    shorts at its high ask (``backtests.broker.held.Held.floating``; added to here); ``legs_at(bars)``
    (6, len(bars)): long lots, long lots x price, short lots, short lots x price, long lots x margin price
    and short lots x margin price over ``bars`` (``Held.at``); ``trades``: the symbol's closed trades in
    closing order; ``bars``: at each trade's exit bar, the open bid, the low bid, the open ask and the high
    ask (prices on the symbol's grid, so an exit at the open compares exactly).
    """
    opens, lows, open_ask, high_ask = bars
    cs = contract_size
    long_, bar, exit_ = trades.long, trades.exit_bar, trades.exit_price
    at_open = exit_ == np.where(long_, opens, open_ask)
    inside = ~(at_open | trades.stopped)  # no excursion beyond the exit inside its bar where not inside
    if not inside.any():
        return floating, WorstLegs(np.zeros(0, dtype=np.int64), np.zeros((6, 0)))
    long_, bar, exit_ = long_[inside], bar[inside], exit_[inside]
    lots, entry, margin = trades.lots[inside], trades.entry_price[inside], trades.margin_price[inside]
    fall = np.where(long_, lows[inside] - exit_, exit_ - high_ask[inside])
    # in closing order, one bar at a time (``np.add.at``): the same sums as trade by trade
    np.add.at(floating, bar, np.where(fall < 0.0, fall, 0.0) * lots * cs)
    touched = distinct(bar)
    legs = legs_at(touched)  # a copy: the held legs stay the close's
    at = np.searchsorted(touched, bar)
    for side, mask in ((0, long_), (2, ~long_)):
        np.add.at(legs[side], at[mask], lots[mask])
        np.add.at(legs[side + 1], at[mask], (lots * entry)[mask])
        np.add.at(legs[4 + side // 2], at[mask], (lots * margin)[mask])
    return floating, WorstLegs(touched, legs)


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of whole numbers (each once, in increasing order), by sorting: NumPy's own ``unique``
    hashes, and on the hundred thousand bars of a million-bar run's steps it is dozens of times slower."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


class WorstLegs(NamedTuple):
    """The legs held at a bar's worst prices where a trade closed inside it still counts there: ``bars``
    (sorted, int64) and ``legs`` (6, len(bars)), in ``held``'s rows."""

    bars: np.ndarray
    legs: np.ndarray


class ClosedTrades(NamedTuple):
    """The columns of one symbol's closed trades that ``worst_floating`` reads, in closing order."""

    long: np.ndarray  # bool: a buy position
    lots: np.ndarray
    entry_price: np.ndarray
    exit_price: np.ndarray
    exit_bar: np.ndarray  # int64
    stopped: np.ndarray  # bool: closed at a stop-loss or by the stop-out (its worst is the exit itself)
    margin_price: np.ndarray  # the price its margin was charged at
