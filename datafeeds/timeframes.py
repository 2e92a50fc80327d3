"""MetaTrader 5 timeframes, with the terminal's integer constants.

The constants are the values of ``mt5.TIMEFRAME_*`` so a ``Timeframe`` can be handed to the terminal API
unchanged. Minute-based frames encode minutes directly; hours set bit 14 (16384 + hours); weeks bit 15;
months bits 14 and 15.
"""

from __future__ import annotations

from enum import IntEnum

import pandas as pd

from datafeeds.errors import DataError


class Timeframe(IntEnum):
    M1 = 1
    M2 = 2
    M3 = 3
    M4 = 4
    M5 = 5
    M6 = 6
    M10 = 10
    M12 = 12
    M15 = 15
    M20 = 20
    M30 = 30
    H1 = 16385
    H2 = 16386
    H3 = 16387
    H4 = 16388
    H6 = 16390
    H8 = 16392
    H12 = 16396
    D1 = 16408
    W1 = 32769
    MN1 = 49153

    @classmethod
    def parse(cls, value: str | int | Timeframe) -> Timeframe:
        """Accept ``"H1"``, ``"h1"``, ``16385`` or a ``Timeframe``; raise a ValueError listing valid names."""
        if isinstance(value, Timeframe):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        elif isinstance(value, str):
            name = value.strip().upper()
            if name in cls.__members__:
                return cls[name]
            if name.isdigit():
                return cls.parse(int(name))
        valid = ", ".join(cls.__members__)
        raise DataError(f"unknown timeframe {value!r}: expected one of {valid}")

    @property
    def seconds(self) -> int:
        """Nominal length in seconds (a month counts 30 days; use ``offset`` for calendar arithmetic)."""
        if self is Timeframe.MN1:
            return 30 * 86400
        if self is Timeframe.W1:
            return 7 * 86400
        if self.value & 0x4000:
            return (self.value & 0x3FFF) * 3600
        return self.value * 60

    @property
    def offset(self) -> pd.DateOffset | pd.Timedelta:
        """Calendar step between two bar open times (weeks open on Sunday, months on the 1st, as in MT5)."""
        if self is Timeframe.MN1:
            return pd.offsets.MonthBegin(1)
        return pd.Timedelta(seconds=self.seconds)

    @property
    def pandas_rule(self) -> str:
        """Resampling rule for pandas, labelled by bar open time: MT5 weeks start on Sunday 00:00."""
        if self is Timeframe.MN1:
            return "MS"
        if self is Timeframe.W1:
            return "W-SUN"  # used with label/closed='left' and anchored to Sunday by the resampler
        if self.value & 0x4000:
            return f"{self.value & 0x3FFF}h"
        return f"{self.value}min"
