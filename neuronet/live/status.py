"""The console's one line per closed bar: time, bid/ask, net position, equity and today's P&L."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd


class StatusLine:
    """Formats and emits the status line; today's P&L counts from the first line of each UTC day."""

    def __init__(self, emit: Callable[[str], None], symbol: str, timeframe: str):
        self.emit, self.symbol, self.timeframe = emit, symbol, timeframe
        self._day: tuple[Any, float] | None = None

    def show(self, when: pd.Timestamp, row: pd.Series, meta: Any, trading: Any, broker: Any) -> str:
        digits = meta.digits
        bid = float(row["close"])
        if broker is not None:  # paper: at the bar's close, with the spread the account uses
            t = len(broker.closes) - 1
            ask = bid + float(broker.spread[t])
            cs = broker.config.contract_size
            floating = sum(
                p.side * ((bid if p.side > 0 else ask) - p.price) * p.lots * cs for p in broker.open_positions
            )
            equity = broker.balance + floating
            net = sum(p.side * p.lots for p in broker.open_positions)
        else:
            ask = bid + float(row["spread"]) * meta.point
            equity = float(trading.account().equity)
            net = sum(p.side * p.lots for p in trading.positions())
        if self._day is None or self._day[0] != when.date():
            self._day = (when.date(), equity)
        line = (
            f"{when:%Y-%m-%d %H:%M} {self.symbol} {self.timeframe} bid {bid:.{digits}f} ask {ask:.{digits}f} "
            f"position {net:+.2f} equity {equity:.2f} today {equity - self._day[1]:+.2f}"
        )
        self.emit(line)
        return line
