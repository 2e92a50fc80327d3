"""Several symbols on one account: a broker per symbol sharing the account and the ledger, and the
conversions of each symbol's profit and margin into the deposit currency.

MetaTrader converts a symbol's profit from its profit currency and its margin from its margin currency
into the deposit currency through the symbol that quotes one against the other (MetaTrader 5 Help, "Margin
Calculation: Retail Forex, Futures" and MQL5 Reference, "Symbol Properties", ``SYMBOL_CURRENCY_PROFIT`` /
``SYMBOL_CURRENCY_MARGIN``): on a dollar account USDJPY's yen through USDJPY itself, EURGBP's pounds through
GBPUSD and its euro margin through EURUSD. ``conversion`` finds that pair among the account's symbols; a
conversion no loaded symbol gives is refused by name (``ConversionError``), never taken as 1.0.

Every symbol's bars lie on the account's one timeline (``backtests.alignment``), so bar ``t`` is the same
moment for every broker of the account.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from backtests.broker.config import AccountConfig
from backtests.broker.convert import UNITY, Rate
from backtests.broker.core import Broker
from backtests.broker.market import BarPriceError
from backtests.broker.terms import swap_currency, symbol_config, terms_of
from backtests.errors import SymbolsError
from datafeeds.symbols import SymbolSpec


class ConversionError(SymbolsError):
    """A symbol's profit or margin currency that no loaded symbol converts into the deposit currency."""


def conversion(spec: SymbolSpec, currency: str, deposit: str, brokers: Mapping[str, Any], what: str):
    """The ``Rate`` that converts ``currency`` (``spec``'s profit or margin currency) into ``deposit``:
    UNITY when they are the same, else through ``spec``'s own symbol or a pair among ``brokers``
    (multiplied by a pair quoting ``currency`` in ``deposit``, divided by one quoting ``deposit`` in it)."""
    if currency == deposit:
        return UNITY
    if spec.name == currency + deposit or (spec.base == currency and spec.profit_currency == deposit):
        return Rate(None, False, spec.name)
    if spec.name == deposit + currency or (spec.base == deposit and spec.profit_currency == currency):
        return Rate(None, True, spec.name)
    for name, divide in ((currency + deposit, False), (deposit + currency, True)):
        if name in brokers:
            return Rate(brokers[name], divide, name)
    raise ConversionError(
        f"symbol {spec.name}: its {what} in {currency} needs {currency}{deposit} or {deposit}{currency} "
        "to be "
        f"converted into the account's {deposit}; load that symbol too (it is not traded unless the EA does)"
    )


def open_brokers(
    columns: Mapping[str, tuple],
    specs: Mapping[str, SymbolSpec],
    account: AccountConfig,
    clock: Any,
    make: Callable[..., Broker] = Broker,
) -> dict[str, Broker]:
    """One broker per symbol of ``columns`` (symbol -> (open, high, low, close, spread, time) on the
    account's timeline), all on one account, each with its specification's terms and its conversions.

    ``make`` builds a broker (``Broker`` or the harness's subclass) from those columns, the point, the
    symbol's settings, the clock and the keywords ``terms`` and ``share``."""
    brokers: dict[str, Broker] = {}
    first = None
    for name, cols in columns.items():
        spec = specs[name]
        try:
            broker = make(
                *cols, spec.point, symbol_config(account, spec), clock, terms=terms_of(spec), share=first
            )
        except BarPriceError as e:  # the bars of which symbol (a conversion pair's among them)
            raise BarPriceError(f"{name}: {e}") from None
        brokers[name] = broker
        first = first or broker
    deposit = account.currency
    for name, broker in brokers.items():
        spec = specs[name]
        profit = conversion(spec, spec.profit_currency, deposit, brokers, "profit")
        if spec.calc_mode in ("cfd", "cfd_leverage"):
            margin = None  # charged at the price in the profit currency, converted by ``profit``
        elif spec.margin_currency == spec.base and spec.profit_currency == deposit:
            margin = None  # its own opening price (EURUSD on a dollar account)
        else:
            margin = conversion(spec, spec.margin_currency, deposit, brokers, "margin")
        swap = None  # points and interest: in the profit currency
        if spec.swap_mode.startswith("currency_"):
            swap = conversion(spec, swap_currency(spec, deposit), deposit, brokers, "swap")
        broker.money.convert(profit, margin, swap)
        broker.ledger.convert(name, profit)
    first.funds.refresh()
    return brokers


def conversion_pairs(symbols, deposit: str, table: Mapping[str, SymbolSpec] | None = None) -> list[str]:
    """The symbols of the built-in table that convert ``symbols``' profit, margin and swap currencies into
    ``deposit`` and are not among them (what a loader fetches besides the traded symbols)."""
    from datafeeds.symbols import BUILTIN, find_spec

    out: list[str] = []
    for name in symbols:
        spec = find_spec(name, table or {})
        for currency in (spec.profit_currency, spec.margin_currency, swap_currency(spec, deposit)):
            if currency == deposit or {spec.base, spec.profit_currency} == {currency, deposit}:
                continue
            pairs = [p for p in (currency + deposit, deposit + currency) if p in BUILTIN]
            if pairs and not any(p in symbols or p in out for p in pairs):
                out.append(pairs[0])
    return out
