"""The legs positions hold, kept as steps, are the running sums over every bar, bit for bit: the margin and
the curves made from them move no figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests.broker.held import held_steps
from backtests.broker.records import Segment


def _bar_by_bar(segments: list[Segment], n: int) -> np.ndarray:
    """The legs over every bar as running sums of each bar's starts and ends (the definition)."""
    legs = np.zeros((6, n + 1))
    for row, sign in ((0, 1), (2, -1)):
        mine = [s for s in segments if s.side == sign]
        for col, amount in ((row, lambda s: s.lots), (row + 1, lambda s: s.lots * s.price),
                            (4 + row // 2, lambda s: s.lots * s.margin_price)):  # fmt: skip
            where = [s.start for s in mine] + [s.end for s in mine]
            weights = [amount(s) for s in mine] + [-amount(s) for s in mine]
            at = np.array(where, dtype=np.int64)
            legs[col] = np.bincount(at, np.array(weights), minlength=n + 1)[: n + 1]
    return np.cumsum(legs[:, :n], axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_held_legs_as_steps_spread_to_the_running_sums_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = 400
    segments = []
    for _ in range(int(rng.integers(1, 120))):
        start = int(rng.integers(0, n))
        end = min(n, start + int(rng.integers(1, 40)))  # some float to the last bar
        price = float(np.round(rng.uniform(0.9, 1.6), 5))
        lots = float(np.round(rng.uniform(0.01, 3.0), 2))
        segments.append(Segment(start, end, int(rng.choice([-1, 1])), lots, price, price * 1.1))
    held = held_steps(segments, n)
    got, want = held.spread(held.legs), _bar_by_bar(segments, n)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert not np.signbit(got[got == 0.0]).any()  # no -0.0: the steps stand for the bars between them


def test_no_segment_holds_nothing_and_a_late_first_step_holds_nothing_before_it():
    empty = held_steps([], 5)
    assert empty.spread(empty.legs).tobytes() == np.zeros((6, 5)).tobytes()
    late = held_steps([Segment(3, 5, 1, 1.0, 1.2, 1.2)], 6)
    spread = late.spread(late.legs)
    assert spread[0].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 0.0]


def test_the_balance_deal_by_deal_sums_the_earlier_deals_as_python_and_keeps_the_window_only():
    from backtests.broker.columns import Events
    from backtests.scoring import _balance_path

    events = Events.of([(0, 0.1, 0), (1, 0.2, 1), (2, -0.3, None), (3, 1e-17, 2), (5, 7.5, 3), (9, -2.0, 4)])
    closes = np.array([100.0, 101.0, 102.0])
    got = _balance_path(events, 2, 5, closes)
    before = 100.0 + (0.1 + 0.2)  # the deals before the window, one by one from the first
    want = np.concatenate(([100.0], before + np.cumsum([-0.3, 1e-17, 7.5])))
    assert got.tobytes() == want.tobytes()
    assert _balance_path(Events.of([(9, 1.0, 0)]), 2, 5, closes) is closes  # no deal inside: the closes


def test_the_worst_price_curves_read_from_the_rows_are_those_read_from_the_records():
    from backtests.broker import AccountConfig, Broker
    from datafeeds import read_sample

    df = read_sample().iloc[:1500]
    b = Broker(*(df[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(df)), df.index,
               1e-5, AccountConfig(deposit=10_000.0, missing_spread=0))  # fmt: skip
    rng = np.random.default_rng(3)
    for t in range(len(df)):
        b.bar_open(t)
        if rng.random() < 0.05:
            b.order(1 if rng.random() < 0.5 else -1, 0.5, None, b.opens[t] + 0.002, 0, "")
        elif rng.random() < 0.03:
            b.close(None, None)
        b.bar_range(t)
    b.finish(len(df) - 1)
    from_rows = [c.tobytes() for c in b.worst_curves(0)]
    table = b.trades_frame()
    assert len(table) > 20 and (table["exit_reason"] == "tp").any()
    assert not b.ledger._trades  # the curves and the table read the rows: no record built
    assert len(b.ledger.trades) == len(table)  # built now: read through their fields from here on
    b.ledger._made = None  # made again, from the records this time
    from_records = [c.tobytes() for c in b.worst_curves(0)]
    assert from_records == from_rows
    table["lots"] *= 10.0  # a table changed by hand after the run changes no curve
    table["type"] = "buy"
    b.ledger._made = None
    assert [c.tobytes() for c in b.worst_curves(0)] == from_records


def _broker_run(read_records_at: int | None):
    """A broker over 1,200 sample bars with market orders, pending orders, stops and closes; the record
    lists read (so built) at bar ``read_records_at`` and the rest recorded as rows after it."""
    from backtests.broker import AccountConfig, Broker
    from datafeeds import read_sample

    df = read_sample().iloc[:1200]
    b = Broker(*(df[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(df)), df.index,
               1e-5, AccountConfig(deposit=10_000.0, missing_spread=0))  # fmt: skip
    rng = np.random.default_rng(5)
    for t in range(len(df)):
        if t == read_records_at:
            ledger = b.ledger
            assert ledger.trades and ledger.deals and ledger.orders and ledger.segments[ledger.symbol]
        b.bar_open(t)
        u = rng.random()
        if u < 0.05:
            b.order(1 if rng.random() < 0.5 else -1, 0.5, None, b.opens[t] + 0.002, 0, "m")
        elif u < 0.08:
            b.pending("buy_limit", 0.3, b.opens[t] - 0.001, None, None, None, None, 7, "p")
        elif u < 0.11:
            b.close(None, None)
        b.bar_range(t)
    b.finish(len(df) - 1)
    return b


def _tables(b) -> list:
    from backtests.path_events import BarPrices, deal_events

    events = deal_events(b.ledger, {b.symbol: BarPrices(b)})
    return [b.trades_frame(), b.deals_frame(), b.orders_frame(), *b.worst_curves(0), *b.curves(0), *events]


def _same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, pd.DataFrame):
            assert list(g.columns) == list(w.columns) and list(g.dtypes) == list(w.dtypes)
            pd.testing.assert_frame_equal(g, w, check_exact=True)
        else:
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_the_report_read_from_the_rows_builds_no_record_and_equals_the_records_tables():
    rows_only = _broker_run(None)
    from_rows = _tables(rows_only)
    ledger = rows_only.ledger
    assert not (ledger._trades or ledger._deals or any(ledger._segments.values()))
    assert len(from_rows[0]) > 10 and (from_rows[2]["state"] != "filled").any()  # pending orders too
    frozen = ledger.snapshot()  # copies the rows: builds nothing
    assert not frozen._trades and len(frozen._trade_rows) == len(from_rows[0])
    ledger._trade_rows.append(ledger._trade_rows[0])  # recorded after the snapshot: not in its tables
    ledger._deal_rows.append(ledger._deal_rows[0])
    _same([frozen.trades_frame(), frozen.deals_frame(), frozen.orders_frame()], from_rows[:3])
    assert len(rows_only.trades_frame()) == len(from_rows[0]) + 1  # the columns kept are read again
    every = _broker_run(None)
    for records in (every.ledger.trades, every.ledger.deals, every.ledger.orders):
        assert records  # every record built: the tables read them through their fields
    _same(_tables(every), from_rows)
    _same(_tables(_broker_run(400)), from_rows)  # records built part way, rows after them


def test_a_record_changed_after_the_run_is_read_as_it_is_now():
    b = _broker_run(None)
    trade = b.ledger.trades[0]
    trade.lots = 7.0
    assert b.trades_frame()["lots"].iloc[0] == 7.0


def test_the_curves_a_finished_run_lets_go_are_made_again_the_same():
    # After its figures a run lets go of the ledger's curves and the market's extremes (the result has
    # its own): read again later, they are made again from the same records and bars, bit for bit.
    from backtests import AccountConfig
    from backtests.broker import Broker
    from datafeeds import read_sample

    df = read_sample().iloc[:400]
    cols = (df[c].to_numpy() for c in ("open", "high", "low", "close", "spread"))
    b = Broker(*cols, df.index, 1e-5, AccountConfig(deposit=1_000.0))
    for t, side in ((10, +1), (60, -1), (140, +1), (230, -1)):
        b.bar_open(t)
        b.order(side, 0.3, None, None, 0, "")
    b.finish(len(df) - 1)
    ledger = b.ledger
    before = (*ledger.curves(5), *ledger.worst_curves(5))
    ext = b.market.extremes()
    ledger.release()
    b.market.release()
    assert ledger._made is None and ledger._margin_made is None and b.market._extremes is None
    after = (*ledger.curves(5), *ledger.worst_curves(5))
    for got, want in zip(after, before, strict=True):
        np.testing.assert_array_equal(got, want, strict=True)
    again = b.market.extremes()
    assert again is not ext and again.tails == ext.tails
    for got, want in zip(again[:4], ext[:4], strict=True):
        np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
@pytest.mark.parametrize("seed", range(4))
def test_the_floating_profit_worked_a_chunk_of_bars_at_a_time_is_the_one_over_every_bar(
    seed, chunk, monkeypatch
):
    from backtests.broker import held as held_module

    monkeypatch.setattr(held_module, "_CHUNK", chunk)
    rng = np.random.default_rng(seed)
    n = 300
    segments = []
    for _ in range(int(rng.integers(0, 60))):  # none at all in some: nothing floats
        start = int(rng.integers(5, n))  # nothing held over the first bars
        end = min(n, start + int(rng.integers(1, 40)))
        price = float(np.round(rng.uniform(0.9, 1.6), 5))
        lots = float(np.round(rng.uniform(0.01, 3.0), 2))
        segments.append(Segment(start, end, int(rng.choice([-1, 1])), lots, price, price * 1.1))
    held = held_steps(segments, n)
    bid = np.round(rng.uniform(1.0, 1.5, n), 5)
    ask = bid + np.round(rng.uniform(0.0, 0.0003, n), 5)
    legs = held.spread(held.legs[:4])
    want = 100_000.0 * (legs[0] * bid - legs[1] + legs[3] - legs[2] * ask)
    got = held.floating(lambda a, b: bid[a:b], lambda a, b: ask[a:b], 100_000.0)
    assert got.tobytes() == want.tobytes()
