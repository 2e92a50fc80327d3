"""The order path's records and checks: rows of plain values built into records when read, in the order
they happened, and a volume checked once per value, never a refused one passed later."""

import numpy as np
import pandas as pd
import pytest

from backtests.broker import AccountConfig, Broker
from backtests.broker.records import Deal, OrderRecord, Segment, Trade

POINT = 1e-5


def _broker(n=6, **cfg):
    """Flat hourly bars at 1.10000 then 1.10100 (a 100-point move), no spread."""
    price = np.where(np.arange(n) < 3, 1.1, 1.101)
    time = pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC")
    config = AccountConfig(**{"deposit": 10_000.0, "missing_spread": 0, **cfg})
    return Broker(price, price, price, price, np.zeros(n), time, POINT, config)


def _step(b, t, action):
    b.bar_open(t)
    action(b)
    b.bar_range(t)


def test_records_made_as_rows_read_as_records_in_the_order_they_happened():
    b = _broker()
    _step(b, 0, lambda b: b.order(+1, 1.0, None, None, 7, "first"))
    _step(b, 1, lambda b: b.pending("buy_limit", 0.5, 1.0, None, None, None, None, 0, "limit"))
    _step(b, 3, lambda b: (b.close(None, None), b.order(-1, 2.0, None, None, 0, "")))
    ledger = b.ledger
    assert b.deals == 3 == ledger.deal_count()  # counted without building a record
    orders = ledger.orders
    assert [type(o) for o in orders] == [OrderRecord] * 4
    # the market order, the pending order placed after it, the close and the sell: the order of the requests
    assert [(o.type, o.state) for o in orders] == [
        ("buy", "filled"),
        ("buy_limit", "placed"),
        ("sell", "filled"),
        ("sell", "filled"),
    ]
    assert orders[0].bar_done == 0 and orders[0].fill_price == pytest.approx(1.1) and orders[0].magic == 7
    assert orders[1].bar_done is None and orders[1].fill_price is None
    deals = ledger.deals
    assert [type(d) for d in deals] == [Deal] * 3 and [d.deal for d in deals] == [1, 2, 3]
    assert [(d.entry, d.type) for d in deals] == [("in", "buy"), ("out", "sell"), ("in", "sell")]
    # 100 points on 1 lot of 100,000: 100 USD, the balance after the close
    assert deals[1].profit == 100.0 and deals[1].balance == 10_100.0 == b.balance
    (trade,) = ledger.trades
    assert type(trade) is Trade and trade.profit == 100.0 and trade.entry_bar == 0 and trade.exit_bar == 3
    (segment,) = ledger.segments[b.symbol]
    assert type(segment) is Segment and (segment.start, segment.end, segment.side) == (0, 3, 1)
    # a record read once is the same object when read again; one recorded later follows it
    first = list(deals)
    _step(b, 4, lambda b: b.close(None, None))
    assert ledger.deals[:3] == first and ledger.deals[2] is first[2] and len(ledger.deals) == 4
    assert ledger.deal_count() == 4 and ledger.balance_events == [(3, 100.0, 1)]  # the index of deal 2


def test_a_snapshot_holds_the_records_made_so_far_and_nothing_recorded_after_it():
    b = _broker()
    _step(b, 0, lambda b: b.order(+1, 1.0, None, None, 0, ""))
    _step(b, 3, lambda b: b.close(None, None))
    frozen = b.ledger.snapshot()
    _step(b, 4, lambda b: b.order(-1, 1.0, None, None, 0, ""))
    assert len(frozen.deals) == 2 and len(frozen.orders) == 2 and len(frozen.trades) == 1
    assert len(b.ledger.deals) == 3 and len(b.ledger.orders) == 3
    assert list(frozen.deals_frame()["deal"]) == [1, 2]


def test_a_volume_refused_once_is_refused_every_time_and_a_passed_one_keeps_its_step():
    b = _broker(lot_step=0.1)
    for t in (0, 1):  # the second time the volume is asked again, never taken as checked
        _step(b, t, lambda b: b.order(+1, 0.25, None, None, 0, ""))
    assert [r["retcode"] for r in b.ledger.rejected] == [10014, 10014] and not b.open_positions
    # 0.1 + 0.2 is 0.30000000000000004: on the step, 0.3 lots, both times
    _step(b, 2, lambda b: b.order(+1, 0.1 + 0.2, None, None, 0, ""))
    _step(b, 3, lambda b: b.order(+1, 0.1 + 0.2, None, None, 0, ""))
    assert [o.lots for o in b.ledger.orders] == [0.3, 0.3]
    assert b.open_positions[0].lots == 0.6
