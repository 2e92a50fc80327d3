"""The candle source registry and ``load_candles``, the one call every other package uses.

A source is anything with ``load(symbol, timeframe, start=None, end=None) -> DataFrame`` and keyword
options in its constructor. Sources are reached by name through lazy imports, so an optional piece that
cannot be imported (no ``rpyc``, no network code) only disables its own name:

    sample     the embedded EURUSD H1 sample (default; offline)
    csv        a MetaTrader CSV file (``path=``; ``clock=`` for the broker's time zone)
    mt5        a running MetaTrader 5 terminal (native on Windows, RPyC bridge on Linux)
    synthetic  seeded synthetic FX candles (``seed=``, ``bars=``)
    dukascopy  Dukascopy's public history archive, cached on disk

Remote sources are read through the local store (``datafeeds.cache``): ``cache=True`` (the default for
``mt5``) serves bars pulled before from disk and fetches only the rest, ``cache="refresh"`` pulls the window
again, ``cache=False`` bypasses the store. ``dukascopy`` keeps the archive files it downloads in its own
cache instead (exact copies, settled periods only), so it takes no ``cache`` option.

Ticks (``load_ticks``, for the backtest's tick model) come from the same registry: a source that has
them offers ``load_ticks(symbol, start=None, end=None)`` returning a tick frame (``datafeeds.ticks``):
``mt5`` (``copy_ticks_range``), ``dukascopy`` (the hourly tick files, cached like its candles) and
``synthetic`` (ticks making up its M1 candles exactly); ``csv`` reads a tick file of the terminal's
"Export ticks" (``datafeeds.tick_csv``) instead of a candle file.

Time window: ``start`` is inclusive and ``end`` exclusive, both on bar open times in UTC (naive times are
taken as UTC), so consecutive windows never share a bar. Note that the terminal's ``copy_rates_range``
includes its end.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
from typing import Protocol, runtime_checkable

import pandas as pd

from datafeeds.cache import CachedFeed, load_through, parse_mode
from datafeeds.candles import in_window, meta_of
from datafeeds.clock import UTC, BrokerClock, utc_bound
from datafeeds.errors import DataError, DataTypeError, UnknownSourceError
from datafeeds.mt5_csv import read_mt5_csv
from datafeeds.resample import resample
from datafeeds.synthetic import synthetic_candles
from datafeeds.timeframes import Timeframe
from datafeeds.validate import Repair, ValidationReport, validate
from neuronet.errors import NeuronetError

DEFAULT_SOURCE = "sample"
SOURCES: dict[str, str] = {
    "sample": "datafeeds.sample:SampleSource",
    "csv": "datafeeds.sources:CsvSource",
    "mt5": "datafeeds.terminal:TerminalSource",
    "synthetic": "datafeeds.sources:SyntheticSource",
    "dukascopy": "datafeeds.dukascopy:DukascopySource",
}


TICK_SOURCES: dict[str, str] = {
    "csv": "datafeeds.tick_csv:TickCsvSource",
    "mt5": "datafeeds.terminal:TerminalSource",
    "synthetic": "datafeeds.sources:SyntheticSource",
    "dukascopy": "datafeeds.dukascopy:DukascopySource",
}


class SourceUnavailableError(NeuronetError, LookupError):
    """A registered source whose module (or one of its dependencies) cannot be imported here."""


@runtime_checkable
class CandleSource(Protocol):
    """What every source offers; ``timeframe`` accepts a ``Timeframe``, its name or its MT5 constant."""

    def load(self, symbol: str, timeframe: Timeframe | str | int, start=None, end=None) -> pd.DataFrame: ...


class CsvSource:
    """A MetaTrader CSV file as a source: times in the file are broker time, declared with ``clock``.

    ``symbol`` overrides the name taken from the file; a ``timeframe`` above the file's is resampled.
    """

    def __init__(
        self,
        path: str,
        *,
        clock: BrokerClock | str = UTC,
        digits: int | None = None,
        repair: Repair | None = None,
    ) -> None:
        self.path = path
        self.clock = BrokerClock.parse(clock) if isinstance(clock, str) else clock
        self.digits = digits
        self.repair = repair

    def load(self, symbol: str | None = None, timeframe=None, start=None, end=None) -> pd.DataFrame:
        df = read_mt5_csv(self.path, symbol=symbol, digits=self.digits, clock=self.clock, repair=self.repair)
        if timeframe is not None and Timeframe.parse(timeframe) != meta_of(df).timeframe:
            df = resample(df, timeframe)
        return in_window(df, start, end)


def _fraction(name: str, value: object) -> float:
    """A number from 0 to 1 given as an option (``-o correlation=0.5``)."""
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or not 0.0 <= number <= 1.0:
        raise DataError(f"synthetic {name} must be a number from 0 to 1, not {value!r}")
    return float(number)


def _whole(name: str, value: object) -> int:
    """A whole number >= 0 given as an option (``-o seed=7``; ``1e4`` reads as 10000), never rounded."""
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or not (math.isfinite(number) and number == int(number) and number >= 0):
        raise DataError(f"synthetic {name} must be a whole number >= 0, not {value!r}")
    return int(number)


class SyntheticSource:
    """Seeded synthetic candles (``datafeeds.synthetic``): ``bars`` from ``start``, or ``[start, end)``."""

    def __init__(
        self,
        *,
        seed: int = 0,
        bars: int = 10_000,
        start: str = "2020-01-01",
        clock: BrokerClock | str = UTC,
        annual_vol: float = 0.08,
        spread: int | None = None,
        correlation: float = 0.0,
        common_seed: int | None = None,
    ) -> None:
        self.seed = _whole("seed", seed)
        self.correlation = _fraction("correlation", correlation)
        self.common_seed = None if common_seed is None else _whole("common_seed", common_seed)
        self.bars = _whole("bars", bars)
        self.start = start
        self.clock = BrokerClock.parse(clock) if isinstance(clock, str) else clock
        self.annual_vol = float(annual_vol)
        self.spread = None if spread is None else _whole("spread", spread)

    def load_ticks(
        self, symbol: str = "EURUSD", start=None, end=None, *, ticks_per_minute: float = 80.0
    ) -> pd.DataFrame:
        """Ticks making up this source's M1 candles exactly (``datafeeds.synthetic_ticks``), so bars
        built from them equal ``load(symbol, "M1", ...)`` and its resamples."""
        from datafeeds.synthetic_ticks import synthetic_ticks

        m1 = self.load(symbol, "M1", start, end)
        return synthetic_ticks(m1, seed=self.seed, ticks_per_minute=ticks_per_minute)

    def load(self, symbol: str = "EURUSD", timeframe="H1", start=None, end=None) -> pd.DataFrame:
        return synthetic_candles(
            symbol,
            timeframe,
            None if end is not None else self.bars,
            seed=self.seed,
            start=start if start is not None else self.start,
            end=end,
            clock=self.clock,
            annual_vol=self.annual_vol,
            spread=None if self.spread is None else int(self.spread),
            correlation=self.correlation,
            common_seed=self.common_seed,
        )


def source_names() -> list[str]:
    return list(SOURCES)


def get_source(name: str, *, _registry: dict[str, str] | None = None, **options) -> CandleSource:
    """Instantiate a registered source by name with its keyword options (errors name what is valid)."""
    registry = SOURCES if _registry is None else _registry
    what = "candle" if _registry is None else "tick"
    key = str(name).strip().lower()
    if key not in registry:
        close = difflib.get_close_matches(key, registry, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownSourceError(f"unknown {what} source {name!r}{hint}; choose one of {', '.join(registry)}")
    module_name, _, class_name = registry[key].partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise SourceUnavailableError(
            f"{what} source {key!r} is not available here: cannot import {missing}"
        ) from None
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = [k for k in options if k not in params]
        if unknown:
            takes = ", ".join(p for p in params if p != "self") or "no options"
            close = difflib.get_close_matches(unknown[0], params, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise DataError(f"{what} source {key!r} has no option {unknown[0]!r}{hint} (it takes: {takes})")
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        # A constructor's own message may not say which option it choked on (int("abc")): name them all.
        given = ", ".join(f"{k}={'***' if 'password' in k else repr(v)}" for k, v in options.items())
        raise DataError(f"{what} source {key!r} rejects its options ({given}): {exc}") from None


def load_ticks(source: str, symbol: str | None = None, start=None, end=None, **options) -> pd.DataFrame:
    """Ticks in ``[start, end)`` (UTC) from a tick source by name (``TICK_SOURCES``), checked: in time
    order, finite positive prices, ask not below bid (``datafeeds.ticks``). Other keywords go to the
    source's constructor (``path=`` for ``csv``)."""
    from datafeeds.ticks import check_ticks, tick_meta

    src = get_source(source, _registry=TICK_SOURCES, **options)
    lo, hi = utc_bound(start, "start"), utc_bound(end, "end")
    if lo is not None and hi is not None and lo >= hi:
        raise DataError(f"start {lo} must come before end {hi}")
    try:
        ticks = src.load_ticks(symbol if source == "csv" else symbol or "EURUSD", lo, hi)
    finally:
        if callable(getattr(src, "close", None)):
            src.close()
    check_ticks(ticks, tick_meta(ticks).source)
    return ticks


def load_validated(
    source: str | CandleSource = DEFAULT_SOURCE,
    symbol: str | None = None,
    timeframe: Timeframe | str | int | None = None,
    start=None,
    end=None,
    *,
    repair: Repair | None = None,
    cache: bool | str | None = None,
    **options,
) -> ValidationReport:
    """Like ``load_candles`` but returns the full ``ValidationReport`` (gaps, repairs) with the frame."""
    name = source.strip().lower() if isinstance(source, str) else type(source).__name__
    if name == "csv" and repair is not None:
        options.setdefault("repair", repair)  # a file is repaired on read, where its line numbers are known
    src = get_source(name, **options) if isinstance(source, str) else source
    mode = _cache_mode(cache, src, name)
    lo, hi = utc_bound(start, "start"), utc_bound(end, "end")
    if lo is not None and hi is not None and lo >= hi:
        raise DataError(f"start {lo} must come before end {hi}")
    try:
        if mode:
            tf = timeframe if timeframe is not None else "H1"
            df = load_through(src, symbol or "EURUSD", tf, lo, hi, refresh=mode == "refresh")
        elif isinstance(src, CsvSource):
            df = src.load(symbol, timeframe, lo, hi)
        else:
            df = src.load(symbol or "EURUSD", timeframe if timeframe is not None else "H1", lo, hi)
    finally:
        if isinstance(source, str) and callable(getattr(src, "close", None)):
            src.close()  # sources made here hold no connection past the call
    if not isinstance(df, pd.DataFrame):
        raise DataTypeError(f"candle source {name!r} returned {type(df).__name__}, not a DataFrame")
    meta = meta_of(df)
    return validate(in_window(df, lo, hi), meta.source or name, repair)


def load_candles(
    source: str | CandleSource = DEFAULT_SOURCE,
    symbol: str | None = None,
    timeframe: Timeframe | str | int | None = None,
    start=None,
    end=None,
    *,
    repair: Repair | None = None,
    cache: bool | str | None = None,
    **options,
) -> pd.DataFrame:
    """Load validated candles from a source: ``load_candles()`` is the embedded EURUSD H1 sample.

    ``symbol``/``timeframe`` default to the source's own (EURUSD H1; a CSV file's name and spacing).
    ``start`` inclusive, ``end`` exclusive (UTC). ``repair`` opts in to dropping/sorting bad bars; without
    it bad data raises ``CandleDataError``. ``cache``: ``True``, ``False`` or ``"refresh"`` for the local
    store in front of a remote source (default: on where the source supports it, i.e. ``mt5``; see the
    module docstring). Other keywords go to the source's constructor.
    """
    return load_validated(source, symbol, timeframe, start, end, repair=repair, cache=cache, **options).frame


def _cache_mode(cache: bool | str | None, src: CandleSource, name: str) -> bool | str:
    """Whether (and how) to read ``src`` through the local store."""
    if cache is None:
        return isinstance(src, CachedFeed)
    mode = parse_mode(cache)
    if mode and not isinstance(src, CachedFeed):
        kept = " (it keeps its downloaded archive files itself)" if name == "dukascopy" else ""
        raise DataError(f"candle source {name!r} has no read-through cache{kept}; only mt5 has one")
    return mode
