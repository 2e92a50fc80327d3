"""The margin a symbol's positions hold, in the deposit currency, with the hedged margin of a hedging account.

MetaTrader's formulas (MQL5 Reference, "Symbol Properties", ``ENUM_SYMBOL_CALC_MODE``): Forex ``lots *
contract / leverage * rate`` in the margin currency, Forex No Leverage ``lots * contract * rate``, CFD
``lots * contract * price * rate`` and CFD Leverage ``lots * contract * price / leverage * rate`` in the
profit
currency. Each position is charged at its *margin price*, fixed when it opens: the deposit currency per unit
of margin currency (Forex modes) or the price times the deposit currency per unit of profit currency (CFD
modes), both converted at the deal's side (``backtests.broker.convert``). For EURUSD on a dollar account that
is the position's opening price, so the margin is lots x contract x opening price / leverage.

Hedged positions (MetaTrader 5 Help, "Margin calculation for hedged positions"): of the long and the short
volume of a symbol, the uncovered part (the larger leg less the smaller) is charged as usual at the larger
leg's average opening price, and the hedged part (the smaller leg's volume) with ``SYMBOL_MARGIN_HEDGED``
in place of the contract size, at the average opening price of both legs. ``AccountConfig.margin_hedged``
is that setting: by default the contract size, which charges a hedged 1 + 1 lot pair as one lot (the usual
FX setting: "if 100,000 is specified in the Hedged field, the margin for the two positions is calculated
as per 1 lot"), 0 charges hedged volume nothing.
"""

from __future__ import annotations

import numpy as np

from backtests.broker.book import OpenPosition
from backtests.broker.config import AccountConfig

LEVERAGED = frozenset({"forex", "cfd_leverage"})  # the calculation modes whose margin the leverage divides


class MarginModel:
    """Margin of one symbol's positions on one account (``config``: contract size, leverage, hedged margin;
    ``calc_mode`` and ``margin_rate``: the symbol's, see the module docstring). A position's margin price is
    its ``margin_price``, or its opening price (``price`` in whole points, ``scale`` of them to a unit)
    where that is None."""

    def __init__(self, config: AccountConfig, scale: int, calc_mode: str = "forex", margin_rate: float = 1.0):
        self.contract_size = config.contract_size
        self.leverage = config.leverage if calc_mode in LEVERAGED else 1.0
        self.hedged = config.contract_size if config.margin_hedged is None else config.margin_hedged
        self.scale = scale
        self.rate = margin_rate

    def price_of(self, pos: OpenPosition) -> float:
        """The price ``pos``'s margin is charged at (deposit currency per unit)."""
        return pos.price / self.scale if pos.margin_price is None else pos.margin_price

    def of_positions(self, positions: list[OpenPosition]) -> float:
        """The margin the open positions hold, each at its margin price."""
        if len(positions) == 1:  # one position: ``of_legs``'s one term, without the legs built for it
            p = positions[0]
            if p.lots <= 1e-12:
                return 0.0
            price = p.price / self.scale if p.margin_price is None else p.margin_price  # ``price_of``
            plain = p.lots * self.contract_size * price / self.leverage
            return plain if self.rate == 1.0 else plain * self.rate
        return self.of_legs([(p.side, p.lots, self.price_of(p)) for p in positions])

    def of_legs(self, legs: list[tuple[int, float, float]]) -> float:
        """The margin of positions given as (side, lots, margin price): what a deal would leave open."""
        cs, lev = self.contract_size, self.leverage
        plain = long_lots = long_value = short_lots = short_value = 0.0
        for side, lots, price in legs:
            if lots <= 1e-12:
                continue
            plain += lots * cs * price / lev
            if side > 0:
                long_lots += lots
                long_value += lots * price
            else:
                short_lots += lots
                short_value += lots * price
        if not (long_lots and short_lots):  # nothing hedged: each leg at its own price
            return plain if self.rate == 1.0 else plain * self.rate
        larger = long_value / long_lots if long_lots >= short_lots else short_value / short_lots
        average = (long_value + short_value) / (long_lots + short_lots)
        uncovered = abs(long_lots - short_lots) * cs * larger / lev
        held = uncovered + min(long_lots, short_lots) * self.hedged * average / lev
        return held if self.rate == 1.0 else held * self.rate

    def of_sums(self, long_lots, long_value, short_lots, short_value):
        """The margin of long and short legs given as lots and lots x margin price, scalars or arrays
        (one per bar): the uncovered volume at the larger leg's average price, the hedged volume at both
        legs' average price with the hedged margin in place of the contract size."""
        cs, lev = self.contract_size, self.leverage
        total = long_lots + short_lots
        with np.errstate(divide="ignore", invalid="ignore"):
            larger = np.where(long_lots >= short_lots, long_value / long_lots, short_value / short_lots)
            uncovered = np.abs(long_lots - short_lots) * cs * np.nan_to_num(larger) / lev
            average = (long_value + short_value) / total
            hedged = np.minimum(long_lots, short_lots) * self.hedged * average / lev
        held = np.where(total > 1e-12, uncovered + np.nan_to_num(hedged), 0.0)
        return held if self.rate == 1.0 else held * self.rate
