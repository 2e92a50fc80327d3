"""The console's one line per closed bar: time, bid/ask, net position, equity and today's P&L.

"Today" is the broker's server day (the day the daily loss limit counts by), read from the bar's time
with the bars' broker clock, not the UTC date: a broker on UTC+2 starts its day at 22:00 UTC. On a
terminal, today's P&L is the one the daily loss limit counts (``TerminalTrade.day_pnl``: from the start of
the server day, a position carried over midnight from its value then), followed by "?" while a part of it
cannot be known. A paper account counts from its equity at the end of the server day before (the previous
line's), or from the first line when the run began that day.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


class StatusLine:
    """Formats and emits the status line (see the module docstring)."""

    def __init__(self, emit: Callable[[str], None], symbol: str, timeframe: str):
        self.emit, self.symbol, self.timeframe = emit, symbol, timeframe
        self._day: tuple[int, float] | None = None  # the server day and the equity today's P&L counts from
        self._equity: float | None = None  # the previous line's

    def show(self, when: pd.Timestamp, row: pd.Series, meta: Any, trading: Any, broker: Any) -> str:
        digits = meta.digits
        bid = float(row["close"])
        if broker is not None:  # paper: at the bar's close, with the spread the account uses
            t = len(broker.market) - 1
            ask = bid + float(broker.spread[t])
            equity = broker.equity_at_close(t)
            net = sum(p.side * p.lots for p in broker.open_positions)
        else:
            ask = bid + float(row["spread"]) * meta.point
            equity = float(trading.account().equity)
            net = sum(p.side * p.lots for p in trading.positions())
        day = server_day(when, meta.clock)
        if self._day is None or self._day[0] != day:
            self._day = (day, equity if self._equity is None else self._equity)
        self._equity = equity
        today = trading.day_pnl(day).shown() if broker is None else f"{equity - self._day[1]:+.2f}"
        line = (
            f"{when:%Y-%m-%d %H:%M} {self.symbol} {self.timeframe} bid {bid:.{digits}f} ask {ask:.{digits}f} "
            f"position {net:+.2f} equity {equity:.2f} today {today}"
        )
        self.emit(line)
        return line


def server_day(when: pd.Timestamp, clock: Any) -> int:
    """The broker's server day of the UTC time ``when`` (days since 1970 in broker time)."""
    broker = clock.to_broker_seconds(np.array([pd.Timestamp(when).value // 10**9], dtype=np.int64))
    return int(broker[0]) // 86400
