"""Equity of an account trading several symbols at every price its bars model, and MetaTrader's drawdowns.

MetaTrader tracks equity at every price it models, so a peak inside a bar counts as much as a trough
(``backtests.equity_path`` does this for one symbol). With several symbols each bar of each symbol is
modelled by its four prices (its open, its two extremes in the order of a minute's, a bull bar low first and
a bear bar high first, and its close: ``backtests.paths.ohlc_points``) and the symbols are taken step by step
together: the account's equity at the i-th price of bar t is the balance there plus every symbol's floating
profit at its own i-th price, converted into the deposit currency at the conversion pair's i-th price (a
gain at the dealer's side, as ``backtests.broker.convert`` books it). A symbol with no bar at t stands at
its last close (its aligned market is flat there). Deals take effect where their price lies on their
symbol's four prices, as on one symbol's bars (``equity_path._deal_keys``). With minutes ("1 minute OHLC")
the bars' own four prices are used here too: the minutes of several symbols have no common step, and a
bar's extremes are every minute's extremes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backtests.equity_path import _SHIFT, EquityPath, _BarPrices, _deal_keys, _Skeleton, skeleton_drawdowns

_CHUNK_BARS = 1 << 14  # bars per chunk: a few arrays of four prices per symbol stay small


class _OwnBars(_BarPrices):
    """A symbol's bars by their own four prices, whatever finer path the run worked."""

    def __init__(self, broker):
        super().__init__(broker)
        self.path = None


def account_drawdowns(
    broker, first: int, last: int, deposit: float, start: pd.Timestamp
) -> EquityPath | None:
    """The account of ``broker`` (any of its symbols' brokers) over bars ``first..last``, as
    ``equity_path.path_drawdowns`` gives it for one symbol; None when a deal is neither an entry nor an
    exit (a netting reversal), where the caller keeps the bar-level estimate."""
    desks = list(broker.funds.desks)
    column = {d.symbol: i for i, d in enumerate(desks)}
    bars = {d.symbol: _OwnBars(d) for d in desks}
    events = _events(broker.ledger, desks, bars, column)
    if events is None:
        return None
    keys, moves = events
    state = np.vstack([np.zeros((1, moves.shape[1])), np.cumsum(moves, axis=0)])  # after j events
    skeleton = _Skeleton(deposit, start)
    for a in range(first, last + 1, _CHUNK_BARS):
        b = min(last + 1, a + _CHUNK_BARS)
        price_keys = ((np.arange(a, b, dtype=np.int64) << _SHIFT)[:, None] + np.arange(4)).ravel()
        now = state[np.searchsorted(keys, price_keys, side="right")]  # events up to each price count
        quotes = {d.symbol: _quotes(bars[d.symbol], a, b) for d in desks}
        equity = deposit + now[:, 0]
        for d in desks:
            j = 1 + 4 * column[d.symbol]
            long_lots, long_value, short_lots, short_value = (now[:, j + i] for i in range(4))
            if not (long_lots.any() or short_lots.any()):
                continue
            bid, ask = quotes[d.symbol]
            amount = (
                d.config.contract_size
                / d.scale
                * (long_lots * bid - long_value + short_value - short_lots * ask)
            )
            equity = equity + _converted(d, amount, quotes)
        skeleton.add(equity, lambda i, a=a: a + np.asarray(i) // 4)
    frame = skeleton.frame(broker.market.time)
    return EquityPath(skeleton_drawdowns(frame["equity"].to_numpy(), deposit), frame)


def _quotes(bars: _OwnBars, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Bids and asks (points) of the four prices of bars ``a..b-1``."""
    return bars.own[a:b].ravel(), (bars.own[a:b] + bars.own_spread[a:b]).ravel()


def _converted(desk, amount: np.ndarray, quotes: dict) -> np.ndarray:
    """``amount`` (the symbol's profit currency, at each price) in the deposit currency at the conversion
    pair's price of that step: a gain at the pair's bid (or divided by its ask), a loss the other way."""
    rate = desk.money.profit
    if rate.unity:
        return amount
    pair = desk if rate.pair is None else rate.pair
    bid, ask = (q / pair.scale for q in quotes[pair.symbol])
    gain = amount > 0
    if rate.divide:
        return amount / np.where(gain, ask, bid)
    return amount * np.where(gain, bid, ask)


def _events(ledger, desks: list, bars: dict, column: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keys, moves)``: every change of the balance (column 0) and of each symbol's open volume (four
    columns a symbol: long lots, lots x price, short lots, lots x price) at the key it takes effect,
    sorted; None when a deal is not an entry or an exit."""
    scale = {d.symbol: d.scale for d in desks}
    width = 1 + 4 * len(desks)
    trades = iter(ledger.trades)
    where: dict[str, list] = {s: [] for s in column}
    placed: list[tuple[str, int]] = []  # each deal's symbol and its index in that symbol's list
    rows = []
    for d in ledger.deals:
        k, buy = scale[d.symbol], d.type == "buy"
        price = round(d.price * k)
        placed.append((d.symbol, len(where[d.symbol])))
        where[d.symbol].append((d.bar, None, price, buy, d.comment == "end of test"))
        row = np.zeros(width)
        j = 1 + 4 * column[d.symbol]
        if d.entry == "in":
            row[j + (0 if buy else 2) : j + (2 if buy else 4)] = (d.lots, d.lots * price)
        elif d.entry in ("out", "out_by"):
            trade = next(trades, None)
            if trade is None:
                return None
            entry = trade.entry_price * k
            row[j + (2 if buy else 0) : j + (4 if buy else 2)] = (-trade.lots, -trade.lots * entry)
        else:
            return None
        rows.append(row)
    own = {s: _deal_keys(bars[s], where[s]) for s in column}
    deal_keys = [int(own[s][i]) for s, i in placed]
    keys = list(deal_keys)
    for bar, amount, deal in ledger.balance_events:
        keys.append(bar << _SHIFT if deal is None or deal >= len(deal_keys) else deal_keys[deal])
        row = np.zeros(width)
        row[0] = amount
        rows.append(row)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, width))
    order = np.argsort(np.array(keys, dtype=np.int64), kind="stable")
    return np.array(keys, dtype=np.int64)[order], np.array(rows)[order]
