"""Swap: money per lot per night a position is held over the rollover, tripled on one weekday, none at
weekends (MetaTrader's swap in points: ``SYMBOL_SWAP_MODE_POINTS``). The rollover is the broker's server
midnight and the days are its server days (``backtests.broker.market.server_days``): a UTC+2 server charges
at 22:00 UTC, and its triple-swap Wednesday is a Wednesday of its clock."""

from __future__ import annotations

from backtests.broker.account import cents
from backtests.broker.book import OpenPosition
from backtests.broker.config import AccountConfig


class SwapModel:
    """Swap rates of one symbol (``config``: points per lot per night, long and short, the triple day)."""

    def __init__(self, config: AccountConfig, point: float):
        self.long = config.swap_long
        self.short = config.swap_short
        self.triple_weekday = config.triple_swap_weekday
        self.point = point
        self.contract_size = config.contract_size
        self.active = bool(self.long or self.short)

    def nights(self, day_from: int, day_to: int) -> int:
        """Nights charged from server day ``day_from`` to server day ``day_to`` (days since 1970-01-01 in the
        broker's clock): weekdays once, the triple day three times, Saturday and Sunday not at all."""
        nights = 0
        for d in range(day_from, day_to):
            weekday = (d + 3) % 7  # 1970-01-01 was a Thursday (weekday 3)
            if weekday >= 5:
                continue
            nights += 3 if weekday == self.triple_weekday else 1
        return nights

    def amount(self, pos: OpenPosition, nights: int) -> float:
        """The swap of ``pos`` over ``nights`` nights, deposit currency (whole cents)."""
        rate = self.long if pos.side > 0 else self.short
        return cents(rate * nights * pos.lots * self.point * self.contract_size)
