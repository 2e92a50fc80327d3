"""Symbol specifications: what MetaTrader's ``symbol_info`` says about a symbol, as one frozen record.

A specification holds what the money rules read (MQL5 Reference, "Symbol Properties"): the digits (and so
the point), the contract size, the base, profit and margin currencies, the calculation mode of profit and
margin (``SYMBOL_TRADE_CALC_MODE``), the margin rate, the hedged margin, the swaps in points, the stops and
freeze levels, the volume limits and the trade mode. Three places give one, each checked the same way:

- the terminal's ``symbol_info`` (``spec_from_symbol_info``: the ``mt5`` source);
- ``BUILTIN``: the common FX pairs and the metals as retail brokers quote them (no swaps: a broker's own
  swaps come from its terminal or a file);
- a user file, TOML or JSON (``read_spec_file``): a table per symbol; a symbol of ``BUILTIN`` may change
  some fields only, any other symbol gives at least ``digits``, ``contract_size`` and its currencies.

A symbol none of them knows is refused by name (``UnknownSpecError``): trading it with made-up numbers would
give made-up money.
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from datafeeds.errors import DataError, UnknownNameError
from neuronet.userfiles import open_regular

# ENUM_SYMBOL_CALC_MODE values of the modes the backtest computes (MQL5 Reference, "Symbol Properties"):
#   forex              margin lots * contract / leverage * rate (margin currency), profit in profit currency
#   forex_no_leverage  margin lots * contract * rate
#   cfd                margin lots * contract * market price * rate (profit currency)
#   cfd_leverage       margin lots * contract * market price / leverage * rate
# Every mode books profit as (close - open) * contract * lots in the profit currency.
CALC_MODES = {"forex": 0, "cfd": 2, "cfd_leverage": 4, "forex_no_leverage": 5}
# ENUM_SYMBOL_TRADE_MODE
TRADE_MODES = {"disabled": 0, "long_only": 1, "short_only": 2, "close_only": 3, "full": 4}
# ENUM_SYMBOL_SWAP_MODE values the backtest computes, and what ``swap_long``/``swap_short`` then are:
#   disabled          no swap
#   points            points per lot per night, in the profit currency (the points' value)
#   currency_symbol   money per lot per night in the symbol's base currency
#   currency_margin   money per lot per night in its margin currency
#   currency_deposit  money per lot per night in the account's currency
#   interest_current  % a year (360 days) of the position's value at the current price
#   interest_open     % a year (360 days) of its value at its opening price
# The reopening modes (7, 8) close and reopen positions at the rollover, which the backtest does not model.
SWAP_MODES = {
    "disabled": 0,
    "points": 1,
    "currency_symbol": 2,
    "currency_margin": 3,
    "currency_deposit": 4,
    "interest_current": 5,
    "interest_open": 6,
}
# ENUM_DAY_OF_WEEK, of SYMBOL_SWAP_ROLLOVER3DAYS: the day whose rollover charges three nights
WEEKDAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")


class SpecError(DataError):
    """A specification field that cannot be a MetaTrader value, naming the symbol, the field and the file."""


class UnknownSpecError(UnknownNameError):
    """A symbol with no specification from the terminal, the built-in table or a symbols file."""


@dataclass(frozen=True)
class SymbolSpec:
    """One symbol's trading conditions (units in the comments)."""

    name: str
    digits: int
    contract_size: float  # units per lot
    base: str  # base currency (the first of a currency pair)
    profit_currency: str
    margin_currency: str
    calc_mode: str = "forex"  # a key of CALC_MODES
    margin_rate: float = 1.0  # MetaTrader's initial margin rate (a multiplier)
    margin_hedged: float | None = None  # SYMBOL_MARGIN_HEDGED, units per lot; None = the contract size
    swap_long: float = 0.0  # per lot per night, in the unit of swap_mode (points by default)
    swap_short: float = 0.0
    swap_mode: str = "points"  # a key of SWAP_MODES
    swap_rollover3days: int = 3  # ENUM_DAY_OF_WEEK (0 = Sunday): the triple-swap day, Wednesday
    stops_level: int = 0  # points
    freeze_level: int = 0  # points
    volume_min: float = 0.01
    volume_max: float = 100.0
    volume_step: float = 0.01
    trade_mode: str = "full"  # a key of TRADE_MODES
    description: str = ""

    def __post_init__(self) -> None:
        _check(self, "")

    @property
    def point(self) -> float:
        return 10.0 ** (-self.digits)

    @property
    def tick_value(self) -> float:
        """The value of one point for one lot, in the profit currency (MetaTrader's ``trade_tick_value``
        before conversion into the deposit currency)."""
        return self.contract_size * self.point

    def to_dict(self) -> dict:
        return asdict(self)


def _check(spec: SymbolSpec, origin: str) -> None:
    """Refuse a field no MetaTrader symbol has (one line naming the symbol, the field and the file)."""
    where = f"{origin}: " if origin else ""

    def bad(field: str, why: str) -> SpecError:
        return SpecError(f"{where}symbol {spec.name}: {field}={getattr(spec, field)!r}: {why}")

    if not isinstance(spec.name, str) or not spec.name.strip() or spec.name != spec.name.strip():
        raise SpecError(f"{where}a symbol needs a name without spaces around it, not {spec.name!r}")
    if isinstance(spec.digits, bool) or not isinstance(spec.digits, int) or not 0 <= spec.digits <= 10:
        raise bad("digits", "a whole number of decimals from 0 to 10")
    for name in ("contract_size", "margin_rate", "volume_min", "volume_max", "volume_step"):
        value = getattr(spec, name)
        if not _number(value) or not value > 0:
            raise bad(name, "a finite number > 0")
    if spec.volume_max < spec.volume_min:
        raise bad("volume_max", f"below volume_min {spec.volume_min}")
    if spec.margin_hedged is not None and not (_number(spec.margin_hedged) and spec.margin_hedged >= 0):
        raise bad("margin_hedged", "a finite number of units >= 0")
    for name in ("swap_long", "swap_short"):
        if not _number(getattr(spec, name)):
            raise bad(name, "a finite number of points")
    for name in ("stops_level", "freeze_level"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(name, "a whole number of points >= 0")
    for name in ("base", "profit_currency", "margin_currency"):
        value = getattr(spec, name)
        if not (isinstance(value, str) and len(value) == 3 and value.isalpha() and value.isupper()):
            raise bad(name, "a currency code of three capital letters, e.g. USD")
    if spec.calc_mode not in CALC_MODES:
        raise bad("calc_mode", f"one of {', '.join(CALC_MODES)} (MetaTrader's SYMBOL_TRADE_CALC_MODE)")
    if spec.trade_mode not in TRADE_MODES:
        raise bad("trade_mode", f"one of {', '.join(TRADE_MODES)} (MetaTrader's SYMBOL_TRADE_MODE)")
    if spec.swap_mode not in SWAP_MODES:
        raise bad("swap_mode", f"one of {', '.join(SWAP_MODES)} (MetaTrader's SYMBOL_SWAP_MODE)")
    day = spec.swap_rollover3days
    if isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= 5:
        raise bad(
            "swap_rollover3days",
            "a weekday 1 (Monday) to 5 (Friday) as MetaTrader's ENUM_DAY_OF_WEEK counts them: the day "
            "whose rollover charges three nights (weekends have none)",
        )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _pair(name: str, digits: int, description: str) -> SymbolSpec:
    base, quote = name[:3], name[3:]
    return SymbolSpec(name, digits, 100_000.0, base, quote, base, description=description)


_CURRENCIES = {
    "EUR": "Euro",
    "GBP": "Great Britain Pound",
    "USD": "US Dollar",
    "JPY": "Japanese Yen",
    "CHF": "Swiss Franc",
    "CAD": "Canadian Dollar",
    "AUD": "Australian Dollar",
    "NZD": "New Zealand Dollar",
}
_PAIRS = [
    "EURUSD",
    "GBPUSD",
    "AUDUSD",
    "NZDUSD",
    "USDJPY",
    "USDCHF",
    "USDCAD",
    "EURGBP",
    "EURJPY",
    "EURCHF",
    "EURAUD",
    "EURCAD",
    "EURNZD",
    "GBPJPY",
    "GBPCHF",
    "GBPAUD",
    "GBPCAD",
    "GBPNZD",
    "AUDJPY",
    "AUDCAD",
    "AUDCHF",
    "AUDNZD",
    "CADJPY",
    "CADCHF",
    "CHFJPY",
    "NZDJPY",
    "NZDCAD",
    "NZDCHF",
]

# The common FX pairs (5 digits, 3 against the yen; 100,000 units a lot) and the metals (gold: 100 ounces a
# lot, 2 digits; silver: 5,000 ounces, 3 digits), all in MetaTrader's "Forex" mode: margin in the base
# currency, profit in the quote currency.
BUILTIN: dict[str, SymbolSpec] = {
    **{
        p: _pair(p, 3 if p.endswith("JPY") else 5, f"{_CURRENCIES[p[:3]]} vs {_CURRENCIES[p[3:]]}")
        for p in _PAIRS
    },
    "XAUUSD": SymbolSpec("XAUUSD", 2, 100.0, "XAU", "USD", "XAU", description="Gold vs US Dollar"),
    "XAGUSD": SymbolSpec("XAGUSD", 3, 5_000.0, "XAG", "USD", "XAG", description="Silver vs US Dollar"),
}

_REQUIRED = ("digits", "contract_size", "base", "profit_currency", "margin_currency")
_FIELDS = {f.name for f in fields(SymbolSpec)} - {"name"}


def spec_from_mapping(name: str, values: Mapping[str, Any], origin: str, base: SymbolSpec | None = None):
    """A specification from a symbols file's table: ``base`` (a built-in one) with ``values`` applied, or
    a new symbol from ``values`` alone. Unknown fields, missing ones and bad values are one line each."""
    where = f"{origin}: symbol {name}"
    unknown = sorted(set(values) - _FIELDS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(_FIELDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; fields: {', '.join(sorted(_FIELDS))}"
        raise SpecError(f"{where}: unknown field {unknown[0]!r}{hint}")
    given = dict(values)
    if isinstance(given.get("swap_rollover3days"), str):  # "wednesday" as well as 3
        day = given["swap_rollover3days"].strip().lower()
        given["swap_rollover3days"] = WEEKDAYS.index(day) if day in WEEKDAYS else given["swap_rollover3days"]
    for key in (
        "stops_level",
        "freeze_level",
        "digits",
        "swap_rollover3days",
    ):  # TOML has no 10.0 for a count, JSON may
        value = given.get(key)
        if isinstance(value, float) and value.is_integer():
            given[key] = int(value)
    for key in ("contract_size", "margin_rate", "margin_hedged", "swap_long", "swap_short"):
        if isinstance(given.get(key), int) and not isinstance(given[key], bool):
            given[key] = float(given[key])
    if base is None:
        missing = [k for k in _REQUIRED if k not in given]
        if missing:
            raise SpecError(
                f"{where}: not a built-in symbol, so the file must give {', '.join(_REQUIRED)} "
                f"(missing: {', '.join(missing)})"
            )
    try:
        if base is None:
            base = SymbolSpec(name, **{k: given.pop(k) for k in _REQUIRED})
        spec = replace(base, name=name, **given)
    except SpecError as exc:
        raise SpecError(f"{origin}: {exc}") from None
    except TypeError as exc:
        raise SpecError(f"{where}: {exc}") from None
    return spec


class _DuplicateKey(ValueError):
    """A JSON object naming one key twice (``json`` would keep the last silently; TOML refuses it)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def read_spec_file(path: str | Path) -> dict[str, SymbolSpec]:
    """Specifications from a user file: TOML (``[EURUSD]`` tables) or JSON (``{"EURUSD": {...}}``), by
    its extension (``.toml``, ``.json``). A built-in symbol's table may change some fields only."""
    path = Path(path)
    kind = path.suffix.lower()
    if kind not in (".toml", ".json"):
        raise SpecError(
            f"{path}: a symbols file is .toml or .json, not {path.suffix or 'without extension'!r}"
        )
    with open_regular(path, "symbols file") as fh:
        raw = fh.read(16 * 1024 * 1024 + 1)
    if len(raw) > 16 * 1024 * 1024:
        raise SpecError(f"{path}: larger than 16 MiB; not a symbols file")
    try:
        text = raw.decode("utf-8")
        doc = tomllib.loads(text) if kind == ".toml" else json.loads(text, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not UTF-8 text") from None
    except _DuplicateKey as exc:
        raise SpecError(f"{path}: {exc.args[0]!r} is given twice; give each symbol and field once") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path}: not valid {kind[1:].upper()}: {exc}") from None
    if not isinstance(doc, dict) or not doc:
        raise SpecError(f"{path}: expected one table per symbol, e.g. [EURUSD] with digits = 5")
    out = {}
    for given, values in doc.items():
        if not isinstance(values, dict):
            kind = type(values).__name__
            raise SpecError(f"{path}: symbol {given}: expected a table of fields, not {kind}")
        name = given.upper()  # in capitals, as every source and --symbols name a symbol
        if name in out:
            raise SpecError(f"{path}: symbol {given!r} is given twice (names are compared in capitals)")
        out[name] = spec_from_mapping(name, values, str(path), BUILTIN.get(name))
    return out


def spec_from_symbol_info(info: Any) -> SymbolSpec:
    """A specification from the terminal's ``symbol_info`` record (the ``mt5`` source)."""
    modes = {v: k for k, v in CALC_MODES.items()}
    trade = {v: k for k, v in TRADE_MODES.items()}
    name = str(info.name)
    calc = int(info.trade_calc_mode)
    if calc not in modes:
        raise SpecError(
            f"the terminal's symbol {name} uses calculation mode {calc} (SYMBOL_TRADE_CALC_MODE), which the "
            f"backtest does not compute; it computes {', '.join(f'{k} ({v})' for k, v in CALC_MODES.items())}"
        )
    swaps = {v: k for k, v in SWAP_MODES.items()}
    swap_mode = int(getattr(info, "swap_mode", SWAP_MODES["points"]))
    if swap_mode not in swaps:
        raise SpecError(
            f"the terminal's symbol {name} charges swaps in mode {swap_mode} (SYMBOL_SWAP_MODE), which the "
            f"backtest does not compute; it computes {', '.join(f'{k} ({v})' for k, v in SWAP_MODES.items())}"
        )
    digits = int(info.digits)
    for field in ("point", "trade_tick_size"):  # prices are worked on the point grid of the digits
        step = getattr(info, field, None)
        if step is not None and not math.isclose(float(step), 10.0**-digits, rel_tol=1e-9):
            raise SpecError(
                f"the terminal's symbol {name}: {field}={step!r} is not one point of its {digits} digits; "
                "the backtest prices on the point grid (a tick size of several points is not modelled)"
            )
    hedged = getattr(info, "margin_hedged", None)
    return SymbolSpec(
        name=name,
        digits=digits,
        contract_size=float(info.trade_contract_size),
        base=str(info.currency_base),
        profit_currency=str(info.currency_profit),
        margin_currency=str(info.currency_margin),
        calc_mode=modes[calc],
        margin_hedged=None if hedged is None else float(hedged),
        swap_long=float(info.swap_long),
        swap_short=float(info.swap_short),
        swap_mode=swaps[swap_mode],
        swap_rollover3days=int(getattr(info, "swap_rollover3days", 3)),
        stops_level=int(info.trade_stops_level),
        freeze_level=int(info.trade_freeze_level),
        volume_min=float(info.volume_min),
        volume_max=float(info.volume_max),
        volume_step=float(info.volume_step),
        trade_mode=trade.get(int(info.trade_mode), "disabled"),
        description=str(getattr(info, "description", "") or ""),
    )


def find_spec(name: str, *tables: Mapping[str, SymbolSpec]) -> SymbolSpec:
    """``name``'s specification from the first table that has it (a user file's, then ``BUILTIN``);
    ``UnknownSpecError`` naming the symbol otherwise."""
    for table in (*tables, BUILTIN):
        if name in table:
            return table[name]
    known = sorted({n for t in (*tables, BUILTIN) for n in t})
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownSpecError(
        f"no specification for symbol {name!r}{hint}: it is not in the built-in table of FX pairs and "
        "metals; give its digits, contract size and currencies in a symbols file (--symbols-file, TOML or "
        "JSON), or trade it from the terminal (--source mt5)"
    )
