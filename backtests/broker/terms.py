"""A symbol's terms on the account: what its specification adds to the account's settings, and its money
in the deposit currency.

``SymbolTerms`` carries what ``AccountConfig`` does not: the symbol's name, MetaTrader's calculation mode of
its margin, its margin rate and its trade mode (``datafeeds.symbols.SymbolSpec``). ``symbol_config`` merges a
specification's volumes, swaps, levels and contract size into the account's settings, so each symbol's
broker reads one ``AccountConfig`` as a single-symbol broker always has.

``SymbolMoney`` values one symbol's positions: profit in its profit currency (``(close - open) * contract *
lots``), converted into the deposit currency by its ``profit`` rate, and the margin price a position is
charged at when it opens (``backtests.broker.margin``), converted by its ``margin`` rate. A symbol whose
profit is in the deposit currency (EURUSD on a dollar account) and whose margin currency is its base keeps
the arithmetic of the single-symbol broker exactly: no conversion, the margin at the opening price.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backtests.broker.book import OpenPosition
from backtests.broker.config import AccountConfig
from backtests.broker.convert import UNITY, Rate
from backtests.errors import SpecSettingError
from datafeeds.symbols import SymbolSpec

CFD_MODES = frozenset({"cfd", "cfd_leverage"})  # margin at the market price, in the profit currency


@dataclass(frozen=True)
class SymbolTerms:
    """What a symbol's specification adds to the account's settings (see the module docstring)."""

    symbol: str = ""
    calc_mode: str = "forex"
    margin_rate: float = 1.0
    trade_mode: str = "full"
    swap_mode: str = "points"  # datafeeds.symbols.SWAP_MODES: the unit of the account's swap_long/short


# the account's settings a symbol's specification replaces (``symbol_config``)
SPEC_SETTINGS = (
    "contract_size", "lot_min", "lot_max", "lot_step", "swap_long", "swap_short", "stops_level",
    "freeze_level", "margin_hedged",
)  # fmt: skip


def check_spec_settings(account: AccountConfig) -> None:
    """Refuse an account whose settings of ``SPEC_SETTINGS`` are not the defaults: each symbol's
    specification gives them in a multi-symbol run, so a value set on the account would be ignored."""
    default = AccountConfig()
    for name in SPEC_SETTINGS:
        if getattr(account, name) != getattr(default, name):
            raise SpecSettingError(name, getattr(account, name))


def symbol_config(account: AccountConfig, spec: SymbolSpec) -> AccountConfig:
    """The account's settings with ``spec``'s trading conditions: contract size, volumes, swaps, stops and
    freeze levels, hedged margin."""
    return replace(
        account,
        contract_size=spec.contract_size,
        lot_min=spec.volume_min,
        lot_max=spec.volume_max,
        lot_step=spec.volume_step,
        swap_long=spec.swap_long,
        swap_short=spec.swap_short,
        triple_swap_weekday=spec.swap_rollover3days - 1,  # MetaTrader counts from Sunday, ours from Monday
        stops_level=spec.stops_level,
        freeze_level=spec.freeze_level,
        margin_hedged=spec.margin_hedged,
    )


def terms_of(spec: SymbolSpec) -> SymbolTerms:
    return SymbolTerms(spec.name, spec.calc_mode, spec.margin_rate, spec.trade_mode, spec.swap_mode)


def swap_currency(spec: SymbolSpec, deposit: str) -> str:
    """The currency ``spec``'s swap rates are money of: the base, the margin or the deposit currency in
    those modes, the profit currency for points and interest (a price difference, or a share of a value
    in the profit currency)."""
    return {
        "currency_symbol": spec.base,
        "currency_margin": spec.margin_currency,
        "currency_deposit": deposit,
    }.get(spec.swap_mode, spec.profit_currency)


class SymbolMoney:
    """One symbol's money in the deposit currency (see the module docstring). ``profit`` and ``margin`` are
    the rates of ``backtests.broker.convert`` (``margin`` None: the deal's own price, EURUSD on a dollar
    account)."""

    def __init__(self, config: AccountConfig, scale: int, terms: SymbolTerms):
        self.per_point = config.contract_size / scale  # profit currency per point per lot
        self.scale = scale
        self.cfd = terms.calc_mode in CFD_MODES
        self.profit: Rate = UNITY
        self.margin: Rate | None = None
        self.swap: Rate = UNITY

    def convert(self, profit: Rate, margin: Rate | None, swap: Rate | None = None) -> None:
        """Set the conversions (``backtests.broker.portfolio`` makes them once every symbol has a broker);
        ``swap``: of the swap's currency where it is not the profit currency (``swap_currency``)."""
        self.profit, self.margin = profit, margin
        self.swap = profit if swap is None else swap

    def money(self, amount: float, bid: float, ask: float) -> float:
        """``amount`` of the profit currency in the deposit currency at this symbol's ``bid``/``ask`` now."""
        rate = self.profit
        return amount if rate.unity else rate.profit(amount, bid, ask, self.scale)

    def swap_money(self, amount: float, bid: float, ask: float) -> float:
        """A swap of ``amount`` in its own currency, in the deposit currency now (a credit sold for the
        deposit currency, a charge bought with it, as ``money``)."""
        rate = self.swap
        return amount if rate.unity else rate.profit(amount, bid, ask, self.scale)

    def floating(self, positions: list[OpenPosition], bid: float, ask: float, pair_range=None) -> float:
        """The positions' floating profit at ``bid``/``ask`` (points), in the deposit currency;
        ``pair_range``: the lowest bid and highest ask the profit's conversion pair may reach meanwhile,
        converted then at the worst of them (``Rate.adverse``: a stop-out screen's bound)."""
        k = self.per_point
        amount = sum(
            (bid - p.price) * p.lots * k if p.side > 0 else (p.price - ask) * p.lots * k for p in positions
        )
        if pair_range is not None and not self.profit.unity and self.profit.pair is not None:
            return self.profit.adverse(amount, *pair_range)
        return self.money(amount, bid, ask)

    def margin_price(self, side: int, price: float, bid: float, ask: float) -> float | None:
        """The price a position opened now at ``price`` (points) is charged margin at: None where that is
        its own price (no conversion, or the symbol quotes its margin currency in the deposit currency)."""
        if self.margin is None and (not self.cfd or self.profit.unity):
            return None
        if self.cfd:
            return price / self.scale * self.profit.at_side(side, bid, ask, self.scale)
        return self.margin.at_side(side, bid, ask, self.scale)
