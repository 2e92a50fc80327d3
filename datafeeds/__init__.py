"""Candle sources for neuronet: the embedded sample, MetaTrader CSV, the MT5 terminal, synthetic data,
public history downloads — all returning the same validated frame (see ``datafeeds.candles``)."""

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
from datafeeds.timeframes import Timeframe

__all__ = [
    "COLUMNS",
    "RATES_DTYPE",
    "UTC",
    "BrokerClock",
    "CandleMeta",
    "Timeframe",
    "from_rates",
    "make_frame",
    "meta_of",
    "to_rates",
]
