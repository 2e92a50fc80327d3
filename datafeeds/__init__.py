"""Candle sources for neuronet: the embedded sample, MetaTrader CSV, the MT5 terminal, synthetic data,
public history downloads — all returning the same validated frame (see ``datafeeds.candles``) — and the
ticks of those that have them (``load_ticks``, ``datafeeds.ticks``).

    from datafeeds import load_candles
    df = load_candles()                                   # embedded EURUSD H1 sample, offline
    df = load_candles("csv", path="EURUSD_H1.csv", clock="UTC+2/us")
    d1 = resample(df, "D1")
"""

from datafeeds.candles import (
    COLUMNS,
    RATES_DTYPE,
    CandleMeta,
    from_rates,
    make_frame,
    meta_of,
    to_rates,
)
from datafeeds.clock import UTC, BrokerClock
from datafeeds.errors import CandleDataError, UnknownSourceError
from datafeeds.mt5_csv import read_mt5_csv, write_mt5_csv
from datafeeds.resample import resample
from datafeeds.sample import read_sample
from datafeeds.sources import (
    SOURCES,
    CandleSource,
    CsvSource,
    SourceUnavailableError,
    SyntheticSource,
    get_source,
    load_candles,
    load_ticks,
    load_validated,
)
from datafeeds.store import CandleStore, cache_root
from datafeeds.synthetic import synthetic_candles
from datafeeds.synthetic_ticks import synthetic_ticks
from datafeeds.tick_csv import read_tick_csv, write_tick_csv
from datafeeds.ticks import TickDataError, TickMeta, bars_from_ticks, make_ticks, tick_meta
from datafeeds.timeframes import Timeframe
from datafeeds.validate import Gap, Repair, ValidationReport, guess_clock, validate

__all__ = [
    "COLUMNS",
    "RATES_DTYPE",
    "SOURCES",
    "UTC",
    "BrokerClock",
    "CandleDataError",
    "CandleMeta",
    "CandleSource",
    "CandleStore",
    "CsvSource",
    "Gap",
    "Repair",
    "SourceUnavailableError",
    "SyntheticSource",
    "TickDataError",
    "TickMeta",
    "Timeframe",
    "UnknownSourceError",
    "ValidationReport",
    "bars_from_ticks",
    "cache_root",
    "from_rates",
    "get_source",
    "guess_clock",
    "load_candles",
    "load_ticks",
    "load_validated",
    "make_frame",
    "make_ticks",
    "meta_of",
    "read_mt5_csv",
    "read_sample",
    "read_tick_csv",
    "resample",
    "synthetic_candles",
    "synthetic_ticks",
    "tick_meta",
    "to_rates",
    "validate",
    "write_mt5_csv",
    "write_tick_csv",
]
