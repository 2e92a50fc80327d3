"""Which other symbols' prices move a symbol's money, and the account's checks where only those moved.

With several symbols on one account a symbol's positions are valued in the deposit currency through other
symbols (MQL5 Reference, Symbol Properties, ``SYMBOL_TRADE_CALC_MODE``: profit in the profit currency,
margin in the margin currency, both converted into the deposit currency). EURGBP on a dollar account: its
profit in pounds through GBPUSD, its margin in euros through EURUSD. Of the two, only the profit's pair
moves the account once a position is open:

- the profit is valued at the conversion rate of every price the model gives (a gain at the side that sells
  it, a loss at the side that buys it: ``backtests.broker.convert``), so a GBPUSD spike inside EURGBP's bar
  moves the equity and the margin level, and may stop the account out;
- the margin (MetaTrader's formula of the symbol's calculation mode, in the margin currency: Forex ``lots *
  contract / leverage * margin rate``) is charged when the position opens, in the deposit currency, at the
  margin pair's rate of that deal, a buy at its ask and a sell at its bid (``SymbolMoney.margin_price``,
  kept on the position: ``OpenPosition.margin_price``), and ``MarginModel.price_of`` reads that charge for
  as long as the position stays open (a netting deal that adds to it averages the two charges), as this
  broker charges every margin (``backtests.broker.convert``, ``backtests.broker.margin``: EURUSD's own at
  its opening price too). A EURUSD spike later moves neither the used margin nor the margin level: there is
  no stop-out for it to cause, and none to hide. The report's margin curves read the same
  charges (``Ledger.segment``), so they agree with the replay (``tests/test_backtests/
  test_multi_margin_pair.py`` works a spike of the margin pair alone in every model);
- a swap is converted once, at the rollover, and kept as that amount (``Broker._swap``).

``money_pairs`` is the one owner of that fact (``priced_through`` adds the margin's pair, which a deal
reads when it opens a position): the merged walks (``backtests.merged``,
``backtests.merged_ticks``), their stop-out screens and the open-prices steps below all read it.
``checked_at_rates`` is the one check of "the symbol standing at its price now, only a conversion moved".

Open prices: each symbol holding positions works its bar's range with the other symbols at their opens
(``backtests.multi_replay.open_prices``), so a symbol whose profit is converted through another pair would
only ever be valued at that pair's open: a spike inside the bar that takes the equity below the stop-out
level would go unseen, while the report's own equity path (``backtests.account_path``: every symbol's four
bar prices stepped together) sees it. Here the pair is stepped through its bar's four prices in the order
MetaTrader's tester generates them (open, the nearer extreme of a rising or falling bar, the other, the
close: ``backtests.paths.ohlc_points``), at the bar's spreads, the converted symbol standing at its price
now; where the level is reached at a step, positions are closed as at any stop-out (the most losing first,
re-checked) at that step's rate: at the pair's extreme, never at a rate in the trader's favour of the
crossing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from backtests.paths import ohlc_points


def money_pairs(desk: Any) -> tuple:
    """The other symbols (their brokers) whose prices move ``desk``'s open positions' money in the deposit
    currency: the pair converting its profit, where that is another symbol; never its margin's pair (the
    margin is charged at the deal, see the module docstring). Empty where none does."""
    rate = desk.money.profit
    pair = None if rate.unity else rate.pair
    return () if pair is None or pair is desk else (pair,)


def priced_through(desk: Any) -> tuple:
    """The other symbols whose prices ``desk``'s deals read now: ``money_pairs`` and the pair its margin is
    charged at when a position opens (EURGBP's GBPUSD and EURUSD), each once; a walk that works ``desk``'s
    prices alone must hold none (a fill inside the bar reads them at that moment)."""
    pairs = money_pairs(desk)
    rate = desk.money.margin
    pair = None if rate is None or rate.unity else rate.pair
    return pairs if pair is None or pair is desk or pair in pairs else (*pairs, pair)


def moved_by(desks: Iterable, pair: Any) -> list:
    """The desks of ``desks`` whose money ``pair``'s price moves (``money_pairs``)."""
    return [d for d in desks if pair in money_pairs(d)]


def checked_at_rates(desk: Any, t: int, book: bool = True) -> None:
    """``desk``'s checks at its price now, a conversion rate having moved while its own price did not: its
    pending orders, stops gapped through and the stop-out (``Broker.at_open_checks``), or the stop-out alone
    where ``book`` is False (open prices: its price now is its bar's open, which its bar's range has
    already passed, so an order or a stop it reaches there was reached, or not, by that range; ticks: its
    orders and stops were checked at its own last tick, which another symbol's tick leaves as it was)."""
    bid, ask = desk.price_points(-1), desk.price_points(+1)
    desk.quote = (bid, bid, bid, ask - bid)
    if book:
        desk.at_open_checks(t)
    elif desk.stop_out_on and desk.funds.level_crossed(desk.quote, True, desk):
        desk.stop_out(at_open=True)


def stepped(pair: Any, prices: Iterable, spreads: Iterable, desk: Any, t: int, book: bool = True) -> None:
    """``checked_at_rates`` of ``desk`` (``book``: its orders and stops too) with ``pair`` at each of
    ``prices`` in turn (bids in points, each with its spread), until ``desk`` holds nothing; ``pair``'s price
    is then as it was."""
    kept = pair.inside
    try:
        for price, spread in zip(prices, spreads, strict=True):
            pair.inside = (price, price + float(spread))
            checked_at_rates(desk, t, book)
            if not desk.book.positions:
                break
    finally:
        pair.inside = kept


class PairMoves:
    """Open prices: the stop-out at each of a bar's four prices of the pairs moving a desk's money (see
    the module docstring)."""

    def __init__(self, desks: list):
        self._moved: list[tuple[Any, Any]] = [(d, p) for d in desks for p in money_pairs(d)]
        self._points: dict[int, np.ndarray] = {}  # id(pair) -> (n, 4) prices in the tester's order
        for _, pair in self._moved:
            if id(pair) not in self._points:
                m = pair.market
                self._points[id(pair)] = ohlc_points(m.o, m.h, m.lo, m.c)

    def __bool__(self) -> bool:
        return bool(self._moved)

    def check(self, t: int) -> None:
        """Bar ``t``'s stop-out at each of the four prices of every pair moving the money of a desk that
        holds positions (after every desk has worked its own range)."""
        for desk, pair in self._moved:
            if not desk.book.positions or not desk.stop_out_on:
                continue
            funds = desk.funds
            if funds.stop_out_level <= 0 or funds.ruled_out(t):  # the screen bounds the pair's bar too
                continue
            m = pair.market
            spreads = (m.s_open[t], m.s[t], m.s[t], m.s_close[t])
            stepped(pair, self._points[id(pair)][t].tolist(), spreads, desk, t, book=False)
