"""The stop-out a conversion pair's own move may cause in open prices, with several symbols.

In open prices each symbol holding positions works its bar's range with the other symbols at their opens
(``backtests.multi_replay.open_prices``), so a symbol whose profit is converted through another pair (EURGBP
on a dollar account, through GBPUSD) would only ever be valued at that pair's open: a GBPUSD spike inside
the bar, which takes the account's equity below the stop-out level, would go unseen, while the report's own
equity path (``backtests.account_path``: every symbol's four bar prices stepped together) does see it.

MetaTrader values a position's profit at the conversion rate of each tick it models. Here the pair is
stepped through its bar's four prices in the order MetaTrader's tester generates them (open, the nearer
extreme of a rising or falling bar, the other, the close: ``backtests.paths.ohlc_points``), at the bar's
spreads, with the converted symbol standing at its price now; at each step the account's stop-out is
checked and, where the level is reached, positions are closed as at any stop-out (the most losing first,
re-checked). The close happens at that step's rate: at the pair's extreme, never at a rate in the trader's
favour of the crossing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backtests.paths import ohlc_points


class PairMoves:
    """The converting pairs of an account's desks (symbols' brokers), each with its bars' four prices."""

    def __init__(self, desks: list):
        self._converted: list[tuple[Any, Any]] = []  # (desk, the pair converting its profit)
        self._points: dict[int, np.ndarray] = {}  # id(pair) -> (n, 4) prices in the tester's order
        for desk in desks:
            rate = desk.money.profit
            pair = None if rate.unity else rate.pair
            if pair is not None and pair is not desk:
                self._converted.append((desk, pair))
                if id(pair) not in self._points:
                    m = pair.market
                    self._points[id(pair)] = ohlc_points(m.o, m.h, m.lo, m.c)

    def __bool__(self) -> bool:
        return bool(self._converted)

    def check(self, t: int) -> None:
        """Bar ``t``'s stop-out at each of the four prices of every pair converting a desk that holds
        positions (after every desk has worked its own range)."""
        for desk, pair in self._converted:
            if not desk.book.positions or not desk.stop_out_on:
                continue
            funds = desk.funds
            if funds.stop_out_level <= 0 or funds.ruled_out(t):  # the screen bounds the pair's bar too
                continue
            _stepped(pair, self._points[id(pair)][t], desk, t)


def _stepped(pair: Any, prices: np.ndarray, desk: Any, t: int) -> None:
    """``desk``'s stop-out at each of ``prices`` of ``pair`` (bar ``t``), ``desk`` at its price now."""
    m = pair.market
    spreads = (m.s_open[t], m.s[t], m.s[t], m.s_close[t])
    bid, ask = desk.price_points(-1), desk.price_points(+1)
    kept = pair.inside
    try:
        for price, spread in zip(prices.tolist(), spreads, strict=True):
            pair.inside = (price, price + float(spread))
            desk.quote = (bid, bid, bid, ask - bid)
            if desk.funds.level_crossed(desk.quote, True, desk):
                desk.stop_out(at_open=True)
            if not desk.book.positions:
                break
    finally:
        pair.inside = kept
