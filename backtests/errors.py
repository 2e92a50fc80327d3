"""Errors of the backtest harness's own settings, worded for the command line and for Python alike."""

from __future__ import annotations

from neuronet.errors import NeuronetError

# The command-line option of each account setting that has one (run, backtest, optimize, live).
_OPTIONS = {
    "deposit": "--deposit",
    "leverage": "--leverage",
    "spread": "--spread",
    "commission": "--commission",
    "swap_long": "--swap-long",
    "swap_short": "--swap-short",
    "margin_hedged": "--margin-hedged",
}
_RANGES = {
    "deposit": "a finite amount > 0",
    "leverage": "a finite number > 0 (1:N)",
    "contract_size": "a finite number of units > 0",
    "lot_min": "a finite volume > 0",
    "lot_max": "a finite volume >= lot_min",
    "lot_step": "a finite volume > 0",
    "spread": "a whole number of points >= 0",
    "missing_spread": "a whole number of points >= 0",
    "commission": "a finite amount >= 0 per lot and deal",
    "triple_swap_weekday": "a weekday 0 (Monday) .. 6",
    "stop_out_level": "a finite margin level >= 0 %",
    "stops_level": "a whole number of points >= 0",
    "freeze_level": "a whole number of points >= 0",
    "margin_hedged": "a finite number of units >= 0 per lot",
}


class AccountError(NeuronetError, ValueError):
    """An account setting outside its range (``AccountConfig``): the message names the setting, its
    command-line option where it has one, and what it must be."""

    def __init__(self, name: str, value: object) -> None:
        option = f" ({_OPTIONS[name]})" if name in _OPTIONS else ""
        rule = _RANGES.get(name, "a finite number")
        super().__init__(f"invalid account setting {name}={value!r}{option}: must be {rule}")
        self.name = name
        self.value = value

    def __reduce__(self):  # rebuilt from its parts when it crosses a process boundary (Dask workers)
        return type(self), (self.name, self.value)


class CurrencyError(NeuronetError, ValueError):
    """A symbol whose profit is in another currency than the deposit: the broker books a point's money as
    the contract size over the points in a price unit, which is money of the quote currency (MetaTrader
    converts it into the deposit currency at the cross rate of the moment, which the backtest does not
    have)."""

    def __init__(self, symbol: str, quote: str, deposit: str) -> None:
        super().__init__(
            f"{symbol}'s profit is in {quote}, the account's deposit currency is {deposit}: the backtest "
            f"books money only in the symbol's quote currency; test a symbol quoted in {deposit} (in Python, "
            f"AccountConfig(currency={quote!r}) books {quote})"
        )
        self.symbol, self.quote, self.deposit = symbol, quote, deposit

    def __reduce__(self):  # rebuilt from its parts when it crosses a process boundary (Dask workers)
        return type(self), (self.symbol, self.quote, self.deposit)


class SymbolsError(NeuronetError, ValueError):
    """A multi-symbol run's data or declarations that do not fit: a symbol without candles or a
    specification, a timeframe the data cannot give, a conversion no loaded symbol makes."""


class SpecSettingError(SymbolsError):
    """An account setting that a multi-symbol run takes from each symbol's specification instead (its swaps,
    levels, volumes, contract size, hedged margin): one value for every symbol would mean nothing (a swap in
    points of EURUSD is not one of USDJPY), and dropping it would trade without what the user asked for."""

    def __init__(self, name: str, value: object) -> None:
        option = f" ({_OPTIONS[name]})" if name in _OPTIONS else ""
        super().__init__(
            f"account setting {name}={value!r}{option}: a multi-symbol run takes each symbol's {name} from "
            "its specification; give it per symbol in a symbols file (--symbols-file, Backtest(specs=...))"
        )
        self.name = name
        self.value = value

    def __reduce__(self):  # rebuilt from its parts when it crosses a process boundary (Dask workers)
        return type(self), (self.name, self.value)


class StatisticError(NeuronetError, KeyError):
    """A statistic asked for by a name the report does not have (``backtests.statistics.TABLE``)."""

    def __str__(self) -> str:  # the line itself, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""
