"""The account and symbol trading conditions of a simulated broker, as one frozen record."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from backtests.errors import AccountError, CurrencyError

# ISO 4217 codes of the currencies FX and CFD symbols are quoted in: the last three letters of a six-letter
# name such as EURUSD, USDJPY or XAUUSD (a broker's suffix such as EURUSD.m or USDJPYm aside).
_QUOTES = frozenset("USD EUR GBP JPY CHF CAD AUD NZD SEK NOK DKK HKD SGD ZAR MXN TRY PLN HUF CZK CNH".split())  # noqa: SIM905


def check_currency(symbol: str, config: AccountConfig) -> None:
    """Refuse (``CurrencyError``) a symbol quoted in another currency than the deposit's; a name that shows
    no quote currency (an index such as US30) is taken at its word."""
    name = str(symbol).upper()
    quote = name[3:6]
    if len(name) >= 6 and name[:6].isalpha() and quote in _QUOTES and quote != config.currency.upper():
        raise CurrencyError(str(symbol), quote, config.currency)


@dataclass(frozen=True)
class AccountConfig:
    """Account and symbol trading conditions (units in the names' comments)."""

    deposit: float = 10_000.0  # initial deposit, deposit currency
    currency: str = "USD"
    leverage: float = 100.0  # 1:leverage
    contract_size: float = 100_000.0  # units per lot
    lot_min: float = 0.01
    lot_max: float = 100.0
    lot_step: float = 0.01
    spread: int | None = None  # fixed spread in points; None = each bar's own spread
    missing_spread: int = 10  # points, where spread is None and the candles carry none (all 0)
    commission: float = 0.0  # money per lot per deal (entry and exit each)
    swap_long: float = 0.0  # points per lot per night
    swap_short: float = 0.0
    triple_swap_weekday: int = 2  # 0 = Monday; MT5 default Wednesday
    hedging: bool = False
    stop_out_level: float = 50.0  # margin level (equity / margin, %) that closes every position; 0 = off
    stops_level: int = 0  # minimal distance of SL/TP and pending prices from the market, points
    freeze_level: int = 0  # distance from the market within which orders and stops cannot be changed, points
    # SYMBOL_MARGIN_HEDGED: units per lot the hedged volume of a hedging account is charged as; None = the
    # contract size (a hedged 1 + 1 lot pair holds one lot's margin), 0 = hedged volume holds none
    margin_hedged: float | None = None

    def __post_init__(self) -> None:
        checks = {
            "deposit": self.deposit > 0,
            "leverage": self.leverage > 0,
            "contract_size": self.contract_size > 0,
            "lot_min": self.lot_min > 0,
            "lot_max": self.lot_max >= self.lot_min,
            "lot_step": self.lot_step > 0,
            "spread": self.spread is None or self.spread >= 0,
            "missing_spread": self.missing_spread >= 0,
            "commission": self.commission >= 0,
            "triple_swap_weekday": 0 <= self.triple_swap_weekday <= 6,
            "stop_out_level": self.stop_out_level >= 0,
            "stops_level": self.stops_level >= 0,
            "freeze_level": self.freeze_level >= 0,
            "margin_hedged": self.margin_hedged is None or self.margin_hedged >= 0,
        }
        numbers = {k: v for k, v in asdict(self).items() if isinstance(v, (int, float)) and v is not None}
        checks.update({k: ok and math.isfinite(numbers.get(k, 0)) for k, ok in checks.items()})
        checks.update({k: math.isfinite(v) for k, v in numbers.items() if k not in checks})
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise AccountError(bad[0], getattr(self, bad[0]))

    def to_dict(self) -> dict:
        return asdict(self)
