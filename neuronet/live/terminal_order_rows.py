"""The terminal's order history (``history_orders_get``) as rows of the backtest's orders table
(``backtests.broker.records.OrderRecord``), for ``terminal_ledger``.

Each row names the order's type as the backtest does (``strategies.trade.ORDER_TYPE_CODES``), its state in
words, its times in UTC and the bars they fall in, and its fill price where it was filled (the price of
its first deal among the run's deals). A price, SL, TP or stop-limit of 0
(the terminal's "none") is None; the comment is the user's, without the request id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from backtests.broker.records import OrderRecord
from neuronet.live.terminal_requests import user_comment
from strategies.trade import ORDER_TYPE_CODES

STATES = {0: "started", 1: "placed", 2: "canceled", 3: "partial", 4: "filled", 5: "rejected", 6: "expired"}


def order_row(
    o: Any,
    symbol: str,
    utc_ns: Callable[..., int],
    bar_at: Callable[[int], int],
    fill: float | None,
) -> OrderRecord:
    """Order ``o`` of the terminal's history as a row of ``symbol``'s orders table: ``utc_ns`` turns a
    terminal time (broker seconds, and milliseconds where given) into UTC nanoseconds, ``bar_at`` a UTC
    time into the bar it falls in; ``fill`` is the price of the order's first deal, if it had one."""
    setup = utc_ns(o.time_setup, getattr(o, "time_setup_msc", None))
    done = utc_ns(o.time_done, getattr(o, "time_done_msc", None)) if int(o.time_done or 0) else None
    kind = int(o.type)
    state = STATES.get(int(o.state), str(int(o.state)))
    expiration = int(o.time_expiration or 0)
    return OrderRecord(
        ticket=int(o.ticket),
        bar_setup=bar_at(setup),
        setup_ns=setup,
        type=ORDER_TYPE_CODES[kind].name if kind in ORDER_TYPE_CODES else str(kind),
        lots=float(o.volume_initial),
        price=float(o.price_open) or None,
        stoplimit=float(o.price_stoplimit) or None,
        sl=float(o.sl) or None,
        tp=float(o.tp) or None,
        expiration=pd.Timestamp(utc_ns(expiration), tz="UTC") if expiration else None,
        bar_done=None if done is None else bar_at(done),
        done_ns=done,
        fill_price=fill if state == "filled" else None,
        state=state,
        position=int(o.position_id) or None,
        magic=int(o.magic),
        comment=user_comment(str(o.comment)),
        symbol=symbol,
    )
