"""The margin a symbol's positions hold (MetaTrader's "Forex" calculation: lots x contract size x price /
leverage, in the deposit currency for a quote-currency account), with the hedged margin of a hedging account.

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


class MarginModel:
    """Margin of one symbol's positions on one account (``config``: contract size, leverage, hedged margin);
    positions' prices are in whole points, ``scale`` of them to a price unit."""

    def __init__(self, config: AccountConfig, scale: int):
        self.contract_size = config.contract_size
        self.leverage = config.leverage
        self.hedged = config.contract_size if config.margin_hedged is None else config.margin_hedged
        self.scale = scale

    def of_positions(self, positions: list[OpenPosition]) -> float:
        """The margin the open positions hold, each at its opening price."""
        return self.of_legs([(p.side, p.lots, p.price) for p in positions])

    def of_legs(self, legs: list[tuple[int, float, float]]) -> float:
        """The margin of positions given as (side, lots, price in points): what a deal would leave open."""
        cs, lev, k = self.contract_size, self.leverage, self.scale
        plain = long_lots = long_value = short_lots = short_value = 0.0
        for side, lots, price in legs:
            if lots <= 1e-12:
                continue
            plain += lots * cs * (price / k) / lev
            if side > 0:
                long_lots += lots
                long_value += lots * (price / k)
            else:
                short_lots += lots
                short_value += lots * (price / k)
        if not (long_lots and short_lots):  # nothing hedged: each leg at its own price
            return plain
        larger = long_value / long_lots if long_lots >= short_lots else short_value / short_lots
        average = (long_value + short_value) / (long_lots + short_lots)
        uncovered = abs(long_lots - short_lots) * cs * larger / lev
        return uncovered + min(long_lots, short_lots) * self.hedged * average / lev

    def of_sums(self, long_lots, long_value, short_lots, short_value):
        """The margin of long and short legs given as lots and lots x price (price units), scalars or arrays
        (one per bar): the uncovered volume at the larger leg's average price, the hedged volume at both
        legs' average price with the hedged margin in place of the contract size."""
        cs, lev = self.contract_size, self.leverage
        total = long_lots + short_lots
        with np.errstate(divide="ignore", invalid="ignore"):
            larger = np.where(long_lots >= short_lots, long_value / long_lots, short_value / short_lots)
            uncovered = np.abs(long_lots - short_lots) * cs * np.nan_to_num(larger) / lev
            average = (long_value + short_value) / total
            hedged = np.minimum(long_lots, short_lots) * self.hedged * average / lev
        return np.where(total > 1e-12, uncovered + np.nan_to_num(hedged), 0.0)
