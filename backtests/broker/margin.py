"""The margin a symbol's positions hold and a new deal needs (MetaTrader's "Forex" calculation: lots x
contract size x price / leverage, in the deposit currency for a quote-currency account; prices in whole
points, ``scale`` of them to a price unit)."""

from __future__ import annotations

from backtests.broker.book import OpenPosition
from backtests.broker.config import AccountConfig


class MarginModel:
    """Margin of one symbol's positions on one account (``config``: contract size, leverage, commission)."""

    def __init__(self, config: AccountConfig, scale: int):
        self.contract_size = config.contract_size
        self.leverage = config.leverage
        self.scale = scale

    def of_positions(self, positions: list[OpenPosition]) -> float:
        """The margin the open positions hold, each at its opening price."""
        cs, lev, k = self.contract_size, self.leverage, self.scale
        return sum(p.lots * cs * (p.price / k) / lev for p in positions)

    def of_exposure(self, positions: list[OpenPosition]) -> float:
        """The same margin summed longs first, then shorts (the order the stop-out's equation sums it in)."""
        cs, lev, k = self.contract_size, self.leverage, self.scale
        legs = [(p.lots, p.price) for p in positions if p.side > 0]
        legs += [(p.lots, p.price) for p in positions if p.side < 0]
        return sum(lots * cs * (price / k) / lev for lots, price in legs)

    def of_legs(self, legs: list[tuple[int, float, float]]) -> float:
        """The margin of positions given as (side, lots, price in points): what a deal would leave open."""
        cs, lev, k = self.contract_size, self.leverage, self.scale
        return sum(lots * cs * (price / k) / lev for _, lots, price in legs if lots > 1e-12)
