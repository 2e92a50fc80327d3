"""Equity of an account trading several symbols at every price it models, and MetaTrader's drawdowns.

MetaTrader tracks equity at every price it models, so a peak inside a bar counts as much as a trough
(``backtests.equity_path`` does this for one symbol). With minutes ("1 minute OHLC") or ticks the account
is valued at every price of every symbol in time order, each symbol at its latest quote, profits converted
at the converting symbol's latest quote, deals at their time stamps (``backtests.merged_path``). In open
prices each bar of each symbol is modelled by its four prices (its open, its two extremes in the order of a
minute's, a bull bar low first and a bear bar high first, and its close: ``backtests.paths.ohlc_points``)
and the symbols are taken step by step together: the account's equity at the i-th price of bar t is the
balance and the accrued swap there plus every symbol's floating profit at its own i-th price, converted into
the deposit currency at the conversion pair's i-th price (a gain at the dealer's side, as
``backtests.broker.convert`` books it). A symbol with no bar at t stands at its last close (its aligned
market is flat there). Deals take effect where their price lies on their symbol's four prices, as on one
symbol's bars: the events are ``path_events.deal_events``', the builder one symbol's path reads too (a
symbol's four columns beside the others'). The margin beside it (the report's margin level) is the
positions' margin as charged at their deals, which no later price moves (``backtests.pair_moves``).
An account whose deals are all of one symbol, its profit not converted through another symbol, has that
symbol's own path (``equity_path``: every minute or tick walked), so a one-symbol list gives the one-symbol
run's drawdowns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backtests.equity_path import EquityPath, Skeleton, path_drawdowns, skeleton_drawdowns
from backtests.merged_path import converted, merged_drawdowns
from backtests.path_events import KEY_SHIFT, BarPrices, deal_events

_CHUNK_BARS = 1 << 14  # bars per chunk: a few arrays of four prices per symbol stay small


def account_drawdowns(
    broker, first: int, last: int, deposit: float, start: pd.Timestamp
) -> EquityPath | None:
    """The account of ``broker`` (any of its symbols' brokers) over bars ``first..last``, as
    ``equity_path.path_drawdowns`` gives it for one symbol; None when a deal is neither an entry nor an
    exit (a netting reversal), where the caller keeps the bar-level estimate. An account whose deals are
    all of one symbol, converted through no other symbol, is that symbol's own path (``_lone``); one walked
    through minutes or ticks is valued at every symbol's prices in time order (``merged_path``)."""
    desks = list(broker.funds.desks)
    lone = _lone(broker.ledger, desks)
    if lone is not None:
        return path_drawdowns(lone, first, last, deposit, start, convert=_own_conversion(lone))
    if any(d.price_path is not None for d in desks):
        return merged_drawdowns(broker, desks, first, last, deposit, start)
    bars = {d.symbol: BarPrices(d) for d in desks}  # no finer path: open prices
    events = deal_events(broker.ledger, bars, timed=False)
    if events is None:
        return None
    keys, moves = events
    state = np.vstack([np.zeros((1, moves.shape[1])), np.cumsum(moves, axis=0)])  # after j events
    skeleton = Skeleton(deposit, start)
    for a in range(first, last + 1, _CHUNK_BARS):
        b = min(last + 1, a + _CHUNK_BARS)
        price_keys = ((np.arange(a, b, dtype=np.int64) << KEY_SHIFT)[:, None] + np.arange(4)).ravel()
        now = state[np.searchsorted(keys, price_keys, side="right")]  # events up to each price count
        quotes = {d.symbol: _quotes(bars[d.symbol], a, b) for d in desks}
        equity = deposit + now[:, 0]
        for column, d in enumerate(desks):  # the columns of ``deal_events``, in the desks' order
            j = 1 + 4 * column
            long_lots, long_value, short_lots, short_value = (now[:, j + i] for i in range(4))
            if not (long_lots.any() or short_lots.any()):
                continue
            bid, ask = quotes[d.symbol]
            amount = (
                d.config.contract_size
                / d.scale
                * (long_lots * bid - long_value + short_value - short_lots * ask)
            )
            equity = equity + converted(d, amount, quotes)
        skeleton.add(equity, lambda i, a=a: a + np.asarray(i) // 4)
    frame = skeleton.frame(broker.market.time)
    return EquityPath(skeleton_drawdowns(frame["equity"].to_numpy(), deposit), frame)


def _lone(ledger, desks: list):
    """The desk of the account's only traded symbol, None where deals are of several symbols or the
    profit converts through another symbol's price. One symbol's equity moves with its own prices alone,
    so its path is the one-symbol run's: every minute or tick the run walked (the one-symbol replay's
    ``equity_path.path_drawdowns``), not its bars' four prices, which put a bull bar's low before its high
    whatever its minutes did and take the bar's lowest spread at its extremes, and which would give the
    same symbol run alone and as a one-symbol list two drawdowns."""
    traded = set(ledger.columns("deals").texts("symbol").tolist())
    if len(traded) > 1:
        return None
    desk = next((d for d in desks if d.symbol in traded), desks[0])
    rate = desk.money.profit
    return desk if rate.unity or rate.pair is None else None


def _own_conversion(desk):
    """``path_drawdowns``' conversion of ``desk``'s floating profit at its own quotes (None: no
    conversion)."""
    if desk.money.profit.unity:
        return None
    return lambda amount, bid, ask: converted(desk, amount, {desk.symbol: (bid, ask)})


def _quotes(bars: BarPrices, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Bids and asks (points) of the four prices of bars ``a..b-1``."""
    return bars.own_quotes(slice(a, b))
