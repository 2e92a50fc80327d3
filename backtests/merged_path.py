"""Equity of an account trading several symbols at every price of every symbol, in time order, as
MetaTrader's tester values it in "1 minute OHLC" and "every tick based on real ticks".

The tester values the account's equity at each price it models of any symbol, every symbol then at its
latest quote: a long at its bid, a short at its ask, each at the spread of its own minute or tick, a profit
converted through another symbol at that symbol's latest quote. So here every symbol's prices of a chunk of
bars (``BarPrices.timed``: each minute's four prices at its minute's time, each tick, a bar without finer
data its own four at its opening time) are merged in time order (ties in the symbols' order, as the walks
take them: ``backtests.merged``, ``backtests.merged_ticks``), each symbol's latest quote is carried forward
over the others' prices, and the account's balance, accrued swap and open volumes change at their events
(``path_events.event_table``): a deal at its own symbol's price where it took effect (its time stamp and
price, as on one symbol's path), a rollover's swap at its bar's open or at the moment of a midnight inside
the bar, the end of the test after the bar's last price. Everything is numpy over chunks of prices.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backtests.equity_path import EquityPath, Skeleton, skeleton_drawdowns
from backtests.path_events import KEY_SHIFT, LAST_RANK, BarPrices, event_table

_CHUNK = 1 << 16  # prices of all symbols a chunk, about
_END = np.iinfo(np.int64).max


def merged_drawdowns(
    broker, desks: list, first: int, last: int, deposit: float, start: pd.Timestamp
) -> EquityPath | None:
    """The account's equity path over bars ``first..last`` (``equity_path.EquityPath``) valued at every
    symbol's every price in time order; None when a deal is neither an entry nor an exit (a netting
    reversal), where the caller keeps the bar-level estimate."""
    bars = [BarPrices(d) for d in desks]
    table = event_table(broker.ledger, {d.symbol: p for d, p in zip(desks, bars, strict=True)})
    if table is None:
        return None
    keys, owners, moments, moves = table
    by_bar = np.argsort(keys >> KEY_SHIFT, kind="stable")
    keys, owners, moments, moves = keys[by_bar], owners[by_bar], moments[by_bar], moves[by_bar]
    event_bar = keys >> KEY_SHIFT
    opens = np.append(broker.market.time.as_unit("ns").asi8, _END)  # each bar's opening, then none
    carry = np.zeros(moves.shape[1])  # after the events of the chunks before
    latest: list[tuple[float, float] | None] = [None] * len(desks)  # each symbol's last quote before
    skeleton = Skeleton(deposit, start)
    step = max(1, _CHUNK // sum(p.per_bar(first, last + 1) for p in bars))
    for a in range(first, last + 1, step):
        b = min(last + 1, a + step)
        prices = [p.timed(a, b) for p in bars]
        sizes = [len(ns) for _, ns, _, _ in prices]
        ns = np.concatenate([ns for _, ns, _, _ in prices])
        # each symbol's prices are in time order: a stable sort merges them, ties in the symbols' order
        order = np.argsort(ns, kind="stable")
        merged_ns = ns[order]
        place = np.empty_like(order)
        place[order] = np.arange(len(order))  # the merged place of each symbol's prices
        lo, hi = np.searchsorted(event_bar, (a, b))
        at = _places(prices, sizes, place, merged_ns, opens, keys[lo:hi], owners[lo:hi], moments[lo:hi])
        by_place = np.argsort(at, kind="stable")
        state = carry + np.vstack([np.zeros((1, len(carry))), np.cumsum(moves[lo:hi][by_place], axis=0)])
        carry = state[-1]
        n = len(order)
        lengths = np.diff(np.concatenate(([0], at[by_place], [n])))  # the prices of each state

        def column(c: int, state=state, lengths=lengths) -> np.ndarray:
            return np.repeat(state[:, c], lengths)

        starts = np.cumsum([0, *sizes])
        quotes = {}
        for k, (d, (_, _, bid, ask)) in enumerate(zip(desks, prices, strict=True)):
            mine = place[starts[k] : starts[k + 1]]  # its prices' merged places, in order
            quotes[d.symbol] = _latest(mine, n, bid, ask, latest[k])
            latest[k] = (float(bid[-1]), float(ask[-1]))
        equity = deposit + column(0)
        for k, d in enumerate(desks):  # the columns of ``event_table``, in the desks' order
            j = 1 + 4 * k
            if not (state[:, j].any() or state[:, j + 2].any()):
                continue
            long_lots, long_value, short_lots, short_value = (column(j + i) for i in range(4))
            bid, ask = quotes[d.symbol]
            amount = (
                d.config.contract_size
                / d.scale
                * (long_lots * bid - long_value + short_value - short_lots * ask)
            )
            equity = equity + converted(d, amount, quotes)
        price_bar = np.concatenate([k >> KEY_SHIFT for k, _, _, _ in prices])[order]
        skeleton.add(equity, lambda i, price_bar=price_bar: price_bar[i])
    frame = skeleton.frame(broker.market.time)
    return EquityPath(skeleton_drawdowns(frame["equity"].to_numpy(), deposit), frame)


def _places(prices, sizes, place, merged_ns, opens, keys, owners, moments) -> np.ndarray:
    """The merged place of the first price each event counts at (the number of prices before it): a deal
    at its owner's price of its key, after every price of its bar where its key lies beyond its owner's
    (the end of the test), an event of no deal at its bar's opening or at its moment (a midnight inside
    the bar), before every symbol's price of that time."""
    bar, rank = keys >> KEY_SHIFT, keys & LAST_RANK
    when = np.where(moments >= 0, moments, opens[bar])
    at = np.searchsorted(merged_ns, when, side="left")
    after = np.searchsorted(merged_ns, opens[bar + 1], side="left")
    at = np.where(rank == LAST_RANK, after, at)
    offset = 0
    for k, (own_keys, _, _, _) in enumerate(prices):
        mine = np.flatnonzero((owners == k) & (rank != LAST_RANK))
        if len(mine):
            i = np.searchsorted(own_keys, keys[mine])
            inside = i < len(own_keys)
            inside[inside] = (own_keys[i[inside]] >> KEY_SHIFT) == bar[mine[inside]]
            at[mine] = np.where(inside, place[offset + np.minimum(i, len(own_keys) - 1)], after[mine])
        offset += sizes[k]
    return at


def _latest(mine: np.ndarray, n: int, bid, ask, before) -> tuple[np.ndarray, np.ndarray]:
    """A symbol's latest quote at each of ``n`` merged prices (``mine``: the merged places of its own,
    ``bid``/``ask`` their quotes), its quote ``before`` the chunk (None: its first of the chunk) where it
    has had none of the chunk yet."""
    before = (bid[0], ask[0]) if before is None else before
    held = np.diff(np.append(mine, n))  # each quote stands until the symbol's next one
    lead = np.full(int(mine[0]), before[0]), np.full(int(mine[0]), before[1])
    return np.concatenate((lead[0], np.repeat(bid, held))), np.concatenate((lead[1], np.repeat(ask, held)))


def converted(desk, amount: np.ndarray, quotes: dict) -> np.ndarray:
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
