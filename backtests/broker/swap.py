"""Swap: money per lot per night a position is held over the rollover, tripled on one weekday, none at
weekends. The rollover is the broker's server midnight and the days are its server days
(``backtests.broker.market.server_days``): a UTC+2 server charges at 22:00 UTC, and its triple-swap
Wednesday is a Wednesday of its clock.

The rates are in the unit of the symbol's swap mode (MQL5 Reference, "Symbol Properties",
``ENUM_SYMBOL_SWAP_MODE``; ``datafeeds.symbols.SWAP_MODES``): points (their value in the profit currency),
money per lot in the base, margin or deposit currency, or an annual interest on the position's value at the
current or the opening price over a bank year of 360 days. ``amount`` gives the swap in that currency; the
broker converts it into the deposit currency at the moment's rate and books it in whole cents."""

from __future__ import annotations

from backtests.broker.account import cents
from backtests.broker.book import OpenPosition
from backtests.broker.config import AccountConfig


class SwapModel:
    """Swap rates of one symbol (``config``: points per lot per night, long and short, the triple day)."""

    def __init__(self, config: AccountConfig, point: float, mode: str = "points"):
        self.long = config.swap_long
        self.short = config.swap_short
        self.triple_weekday = config.triple_swap_weekday
        self.point = point
        self.contract_size = config.contract_size
        self.mode = mode
        self.active = bool(self.long or self.short) and mode != "disabled"

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

    def amount(self, pos: OpenPosition, nights: int, bid: float = 0.0, ask: float = 0.0) -> float:
        """The swap of ``pos`` over ``nights`` nights in the swap's currency (points: the profit currency,
        in whole cents). ``bid``/``ask``: the prices now in points, the value of an interest on the current
        price (a long valued at the bid, a short at the ask: where it would close)."""
        rate = self.long if pos.side > 0 else self.short
        mode = self.mode
        if mode == "points":
            return cents(rate * nights * pos.lots * self.point * self.contract_size)
        if mode.startswith("currency_"):
            return rate * nights * pos.lots
        price = pos.price if mode == "interest_open" else (bid if pos.side > 0 else ask)
        value = pos.lots * self.contract_size * price * self.point  # the position's value, profit currency
        return value * rate / 100.0 / 360.0 * nights
