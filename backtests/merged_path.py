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

from itertools import pairwise

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
    carry = moves[event_bar < first].sum(axis=0)  # after the events before: of earlier bars, then chunks
    latest: list[tuple[float, float] | None] = [None] * len(desks)  # each symbol's last quote before
    skeleton = Skeleton(deposit, start)
    step = max(1, _CHUNK // sum(p.per_bar(first, last + 1) for p in bars))
    for a in range(first, last + 1, step):
        b = min(last + 1, a + step)
        prices = [p.timed(a, b) for p in bars]
        places, merged_ns, price_bar = _merged(prices)
        n = len(merged_ns)
        lo, hi = np.searchsorted(event_bar, (a, b))
        at = _places(prices, places, merged_ns, opens, keys[lo:hi], owners[lo:hi], moments[lo:hi])
        by_place = np.argsort(at, kind="stable")
        state = carry + np.vstack([np.zeros((1, len(carry))), np.cumsum(moves[lo:hi][by_place], axis=0)])
        carry = state[-1]
        lengths = np.diff(np.concatenate(([0], at[by_place], [n])))  # the prices of each state
        held = [k for k in range(len(desks)) if state[:, 1 + 4 * k].any() or state[:, 3 + 4 * k].any()]
        needed = set(held) | {_pair_of(desks[k], desks) for k in held}  # the symbols whose quotes count
        quotes = {}
        for k, (_, _, bid, ask) in enumerate(prices):
            if k in needed:
                quotes[desks[k].symbol] = _latest(places[k], n, bid, ask, latest[k])
            latest[k] = (float(bid[-1]), float(ask[-1]))
        held_money = state[:, 0].copy()  # the balance and the unconverted profits' parts fixed by the deals
        for k in held:
            d, j = desks[k], 1 + 4 * k
            if d.money.profit.unity:
                held_money += d.config.contract_size / d.scale * (state[:, j + 3] - state[:, j + 1])
        equity = deposit + np.repeat(held_money, lengths)
        for k in held:  # the columns of ``event_table``, in the desks' order
            d, j = desks[k], 1 + 4 * k
            long_lots, short_lots = np.repeat(state[:, j], lengths), np.repeat(state[:, j + 2], lengths)
            bid, ask = quotes[d.symbol]
            per_point = d.config.contract_size / d.scale
            if d.money.profit.unity:
                equity += per_point * (long_lots * bid - short_lots * ask)
                continue
            fixed = np.repeat(state[:, j + 3] - state[:, j + 1], lengths)
            equity += converted(d, per_point * (long_lots * bid + fixed - short_lots * ask), quotes)
        skeleton.add(equity, lambda i, price_bar=price_bar: price_bar[i])
    frame = skeleton.frame(broker.market.time)
    return EquityPath(skeleton_drawdowns(frame["equity"].to_numpy(), deposit), frame)


def _merged(prices: list) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """``(places, ns, bars)``: the place of each symbol's prices (each list in time order) among all of
    them in time order, ties in the symbols' order (a stable sort of runs already in order merges them),
    and the time and the bar of each merged price."""
    ns = np.concatenate([ns for _, ns, _, _ in prices])
    order = np.argsort(ns, kind="stable")
    place = np.empty_like(order)
    place[order] = np.arange(len(order))
    edges = np.cumsum([0, *(len(k) for k, _, _, _ in prices)])
    bars = np.concatenate([k for k, _, _, _ in prices])[order] >> KEY_SHIFT
    return [place[a:b] for a, b in pairwise(edges)], ns[order], bars


def _places(prices, places, merged_ns, opens, keys, owners, moments) -> np.ndarray:
    """The merged place of the first price each event counts at (the number of prices before it): a deal
    at its owner's price of its key, after every price of its bar where its key lies beyond its owner's
    (the end of the test), an event of no deal at its bar's opening or at its moment (a midnight inside
    the bar), before every symbol's price of that time."""
    bar, rank = keys >> KEY_SHIFT, keys & LAST_RANK
    when = np.where(moments >= 0, moments, opens[bar])
    at = np.searchsorted(merged_ns, when, side="left")
    after = np.searchsorted(merged_ns, opens[bar + 1], side="left")
    at = np.where(rank == LAST_RANK, after, at)
    for k, ((own_keys, _, _, _), place) in enumerate(zip(prices, places, strict=True)):
        mine = np.flatnonzero((owners == k) & (rank != LAST_RANK))
        if len(mine):
            i = np.searchsorted(own_keys, keys[mine])
            inside = i < len(own_keys)
            inside[inside] = (own_keys[i[inside]] >> KEY_SHIFT) == bar[mine[inside]]
            at[mine] = np.where(inside, place[np.minimum(i, len(own_keys) - 1)], after[mine])
    return at


def _pair_of(desk, desks: list) -> int | None:
    """The index of the symbol converting ``desk``'s profit (None: none or itself)."""
    rate = desk.money.profit
    if rate.unity or rate.pair is None:
        return None
    return next(k for k, d in enumerate(desks) if d.symbol == rate.pair.symbol)


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
