"""Profit and margin in the deposit currency, converted at the rate of the moment, as MetaTrader books them.

MetaTrader computes a symbol's profit in its profit currency and its margin in its margin currency (MQL5
Reference, "Symbol Properties", ``ENUM_SYMBOL_CALC_MODE``: profit ``(close - open) * contract * lots``,
margin ``lots * contract / leverage * rate`` for Forex) and converts both into the deposit currency through
the symbol that quotes one currency against the other (MetaTrader 5 Help, "Margin Calculation: Retail
Forex, Futures", conversion into the deposit currency): USDJPY's profit in yen through USDJPY itself,
EURGBP's through GBPUSD, its margin in euros through EURUSD.

The rate is a price of that pair at the moment, on the side a dealer would take:

- profit: an amount gained is sold for the deposit currency, a loss bought with it. Through a pair quoting
  the amount's currency against the deposit currency (GBPUSD for pounds on a dollar account) a gain is
  multiplied by its bid and a loss by its ask; through the other way round (USDJPY for yen) a gain is
  divided by its ask and a loss by its bid. So a conversion never rounds in the trader's favour.
- margin: at the deal's side (a buy at the ask, a sell at the bid), when the position opens; it stays as
  charged then (the broker's margin is computed at the opening price, ``backtests.broker.margin``).

A ``Rate`` reads the current prices of the pair's broker (``marks``: a bar's open, the minute or tick being
worked); the broker of the symbol itself passes its own prices of the moment (a fill's price). ``UNITY``
is the deposit currency itself.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Quoting(Protocol):
    """What a rate reads of the broker of its pair (``backtests.broker.Broker``)."""

    scale: int

    def price_points(self, side: int) -> float: ...


class Rate:
    """Units of the deposit currency per unit of a currency, through one pair (see the module docstring).

    ``pair``: the broker of the pair (None: this symbol's own broker, whose prices the caller passes);
    ``divide``: the pair quotes the deposit currency against the converted one (USDJPY for yen on a
    dollar account), so amounts are divided by its price.
    """

    unity = False

    def __init__(self, pair: Quoting | None, divide: bool, name: str):
        self.pair = pair
        self.divide = divide
        self.name = name  # the pair's symbol, for reports and errors

    def __repr__(self) -> str:
        return f"Rate({self.name}, {'divide' if self.divide else 'multiply'})"

    def _quotes(self, bid: float | None, ask: float | None, scale: int) -> tuple[float, float]:
        """The pair's bid and ask now (price units): the caller's own prices, or the pair broker's marks."""
        pair = self.pair
        if pair is None:
            return bid / scale, ask / scale
        k = pair.scale
        return pair.price_points(-1) / k, pair.price_points(+1) / k

    def profit(self, amount: float, bid: float | None = None, ask: float | None = None, scale: int = 1):
        """``amount`` of the converted currency in the deposit currency now (a gain and a loss each at the
        dealer's side). ``bid``/``ask``: this symbol's prices in points, where the pair is the symbol."""
        if not amount:
            return amount
        b, a = self._quotes(bid, ask, scale)
        if self.divide:
            return amount / (a if amount > 0 else b)
        return amount * (b if amount > 0 else a)

    def adverse(self, amount: float, low: float, high: float) -> float:
        """``amount`` at the pair's price least in the trader's favour while its bid may fall to ``low`` and
        its ask rise to ``high`` (points): a bound over a span in which the pair moves too (the stop-out
        screens of a bar), where the rate of one moment would understate a loss."""
        k = self.pair.scale
        b, a = low / k, high / k
        if self.divide:
            return amount / (a if amount > 0 else b)
        return amount * (b if amount > 0 else a)

    def reach(self, t: int) -> tuple[float, float] | None:
        """The lowest bid and highest ask (points) the pair may stand at in bar ``t``: its price now and its
        bar's range at the widest of its spreads (its minutes' and ticks' too); None where the amount is
        this symbol's own to convert."""
        pair = self.pair
        if pair is None:
            return None
        m = pair.market
        low = min(pair.price_points(-1), m.lo[t])
        return low, max(pair.price_points(+1), m.h[t] + max(m.s_open[t], m.s_wide[t]))

    def at_side(self, side: int, bid: float | None = None, ask: float | None = None, scale: int = 1):
        """The rate at a deal's side (a buy at the ask, a sell at the bid): what a margin is charged at."""
        b, a = self._quotes(bid, ask, scale)
        price = a if side > 0 else b
        return 1.0 / price if self.divide else price

    def closes(self, own) -> tuple[np.ndarray, np.ndarray]:
        """Per bar, at each bar's close: the rate a gain and the rate a loss are converted at (``own``: the
        symbol's own ``Market``, read where the pair is the symbol)."""
        market = own if self.pair is None else self.pair.market
        k = market.scale
        bid, ask = market.c / k, (market.c + market.s_close) / k
        if self.divide:
            return 1.0 / ask, 1.0 / bid
        return bid, ask


class _Unity:
    """The deposit currency itself: nothing to convert."""

    unity = True
    name = ""
    divide = False
    pair = None

    def __repr__(self) -> str:
        return "UNITY"

    def profit(self, amount: float, bid=None, ask=None, scale: int = 1) -> float:
        return amount

    def at_side(self, side: int, bid=None, ask=None, scale: int = 1) -> float:
        return 1.0

    def closes(self, own) -> None:
        return None


UNITY = _Unity()


def convert_closes(rates: tuple[np.ndarray, np.ndarray] | None, amounts: np.ndarray) -> np.ndarray:
    """Per-bar ``amounts`` in the deposit currency with ``rates`` (``Rate.closes``; None: unity)."""
    if rates is None:
        return amounts
    gain, loss = rates
    return amounts * np.where(amounts > 0, gain, loss)
