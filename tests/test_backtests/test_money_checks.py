"""Requests that must never produce money figures: bad stops and volumes, absurd orders, broken bars.

Each refused request is recorded with MetaTrader's retcode and a reason; equity may only fall below zero
through a gap, never through a stop-out that comes too late.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest

from backtests.broker import AccountConfig, Broker
from strategies import EAError, ExpertAdvisor

POINT = 1e-5
FLAT = (1.1, 1.1, 1.1, 1.1)


def _broker(rows, spread=0, **cfg):
    a = np.array(rows, dtype=float)
    time = pd.date_range("2024-01-01", periods=len(a), freq="h", tz="UTC")
    config = AccountConfig(**{"deposit": 10_000.0, "missing_spread": 0, **cfg})
    return Broker(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), spread), time, POINT, config)


def _ea(broker):
    ea = ExpertAdvisor()
    ea.attach(broker, None)
    return ea


def test_a_stop_of_zero_means_no_stop():
    # Before: sell(0.1, sl=0.0) closed at the price 0.0 for about +11,000 USD.
    b = _broker([FLAT, (1.1, 1.12, 1.08, 1.1), FLAT])
    b.bar_open(0)
    ticket = _ea(b).sell(0.1, sl=0.0, tp=0)
    assert ticket is not None and b.positions()[0].sl is None and b.positions()[0].tp is None
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)
    assert b.open_positions and not b.trades


@pytest.mark.parametrize(
    ("side", "sl", "tp", "what"),
    [
        (+1, 1.1005, None, "sl=1.1005 must lie below the bid"),  # SL above the bid: a profit at once
        (+1, None, 1.0995, "tp=1.0995 must lie above the bid"),
        (+1, None, -1.0, "tp=-1.0 is not a price"),  # lost more than the deposit with no stop-out
        (-1, 1.0995, None, "sl=1.0995 must lie above the ask"),
        (-1, None, 1.1005, "tp=1.1005 must lie below the ask"),
        (-1, -0.5, None, "sl=-0.5 is not a price"),
        (+1, math.nan, None, "sl=nan is not a price"),
        (+1, None, math.inf, "tp=inf is not a price"),
        (-1, -math.inf, None, "sl=-inf is not a price"),
        (+1, 1.1, None, "sl=1.1 must lie below the bid"),  # at the bid itself: it would fill at once
    ],
)
def test_stops_on_the_wrong_side_or_not_prices_are_refused_with_10016(side, sl, tp, what):
    b = _broker([FLAT, (1.1, 1.2, 1.0, 1.1)])
    b.bar_open(0)
    assert b.order(side, 1.0, sl, tp, 0, "") is None
    assert not b.open_positions and not b.deals
    rej = b.rejected[-1]
    assert rej["retcode"] == 10016 and what in rej["reason"]
    json.dumps(b.rejected, allow_nan=False)  # the report can carry it as valid JSON


def test_the_stops_level_of_the_symbol_is_enforced():
    b = _broker([FLAT], stops_level=50)
    b.bar_open(0)
    assert b.order(+1, 1.0, 1.1 - 49 * POINT, None, 0, "") is None
    assert b.rejected[-1]["retcode"] == 10016 and "by at least" in b.rejected[-1]["reason"]
    assert b.order(+1, 1.0, 1.1 - 50 * POINT, None, 0, "") == 1


@pytest.mark.parametrize("points", [-10, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("key", ["sl_points", "tp_points"])
def test_negative_or_non_finite_stop_points_raise_at_the_call(key, points):
    b = _broker([FLAT])
    b.bar_open(0)
    with pytest.raises(EAError, match=key):
        _ea(b).buy(0.1, **{key: points})
    assert not b.open_positions


@pytest.mark.parametrize("lots", [math.nan, math.inf, -math.inf, 0.0, -0.1, 0.015, 1e9])
def test_bad_volumes_are_refused_with_10014_and_a_reason(lots):
    b = _broker([FLAT])
    b.bar_open(0)
    assert _ea(b).buy(lots) is None
    rej = b.rejected[-1]
    assert rej["retcode"] == 10014 and rej["reason"].startswith(f"invalid volume {lots}")
    json.dumps(b.rejected, allow_nan=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda ea: ea.buy("0.1"),
        lambda ea: ea.buy(None),
        lambda ea: ea.sell(0.1, sl="1.2"),
        lambda ea: ea.buy(0.1, magic="x"),
        lambda ea: ea.close(lots=0.1),  # a partial close needs a ticket
        lambda ea: ea.close("1"),
        lambda ea: ea.buy_limit(0.1, 1.0, expiration="next tuesday"),
    ],
)
def test_wrong_argument_types_are_ea_errors_not_python_tracebacks(call):
    b = _broker([FLAT])
    b.bar_open(0)
    with pytest.raises(EAError):
        call(_ea(b))


def test_volumes_from_float32_or_integer_arrays_are_the_lots_they_show():
    b = _broker([FLAT])
    b.bar_open(0)
    ea = _ea(b)
    assert ea.buy(np.float32(0.1)) == 1 and b.open_positions[0].lots == 0.1
    assert ea.buy(np.int64(1)) == 1 and b.open_positions[0].lots == 1.1


def test_orders_beyond_the_margin_are_refused_with_10019():
    b = _broker([FLAT], deposit=1000.0)
    b.bar_open(0)
    assert b.order(+1, 1.0, None, None, 0, "") is None
    assert b.rejected[-1]["retcode"] == 10019


def _sweep_bars(n=60, drop=0.002, gap=False, wick=0.02):
    """A steady fall without gaps (each open is the previous close) with long lower wicks, optionally one
    gap down at bar 30. A stop-out filled at a bar's low instead of where the level is crossed would leave
    equity far below zero."""
    closes = 1.1 - drop * np.arange(1, n + 1)
    opens = np.concatenate([[1.1], closes[:-1]])
    if gap:
        opens[30] -= 0.05
        closes[30:] -= 0.05
    highs, lows = np.maximum(opens, closes) + 1e-4, np.minimum(opens, closes) - wick
    return np.column_stack([opens, highs, lows, closes])


@pytest.mark.parametrize(
    "orders",
    [
        [(+1, 100.0, None, None)],  # huge: refused for margin
        [(+1, 1e12, None, None)],  # absurd volume: refused
        [(+1, 1.0, None, -1.0)],  # tp=-1: refused
        [(+1, 1.8, 0.0001, 9.0)],  # nearly all the margin, stops far away
        [(+1, 0.9, 0.0001, None), (+1, 0.9, None, None), (-1, 0.05, None, 0.0001)],
        [(-1, 1.8, None, None), (+1, 3.6, 1e-5, None)],  # reversal into the largest long
    ],
)
@pytest.mark.parametrize("hedging", [False, True])
def test_absurd_orders_never_take_equity_below_zero_without_a_gap(orders, hedging):
    b = _broker(_sweep_bars(), spread=20, deposit=1000.0, leverage=200.0, commission=3.0, hedging=hedging)
    for t in range(60):
        b.bar_open(t)
        if t < len(orders):
            side, lots, sl, tp = orders[t]
            b.order(side, lots, sl, tp, 0, "")
        b.bar_range(t)
        # What is still open survived this bar: equity at its worst prices is above zero.
        worst = b.balance + sum(
            (b.lows[t] - p.price) * p.lots * 100_000
            if p.side > 0
            else -(b.highs[t] + b.spread[t] - p.price) * p.lots * 100_000
            for p in b.open_positions
        )
        assert b.balance >= 0 and worst >= 0
    b.finish(59)
    balance, equity, _ = b.curves(0)
    assert equity.min() >= 0 and balance.min() >= 0
    trades = b.trades_frame()
    longs = trades[trades.type == "buy"]  # no long survives the fall (the netting sell reduces one)
    assert set(longs.exit_reason) <= {"stop out", "sl", "signal"}
    if len(longs) and (longs.sl.isna() | (longs.sl < 1.0)).any():
        assert "stop out" in set(longs.exit_reason)


def test_a_gap_through_the_stop_out_level_closes_at_the_open():
    b = _broker(_sweep_bars(gap=True), deposit=1000.0, leverage=100.0, stop_out_level=20.0)
    b.bar_open(0)
    b.order(+1, 0.5, None, None, 0, "")
    for t in range(60):
        if t:
            b.bar_open(t)
        b.bar_range(t)
    trade = b.trades_frame().iloc[0]
    assert trade.exit_reason == "stop out"
    # A gap is the one way below zero, as in MetaTrader: the open is the first price there is.
    if trade.exit_bar == 30:
        assert trade.exit_price == b.opens[30]


def test_a_stop_loss_met_before_the_stop_out_price_fills_first():
    # 1,000 deposit, 1:100, 0.9 lot at 1.0: the stop-out (50 %) price is 0.993889; the SL at 0.995 is higher.
    rows = [(1.0, 1.0, 1.0, 1.0), (1.0, 1.0, 0.99, 0.99)]
    b = _broker(rows, deposit=1000.0, leverage=100.0)
    b.bar_open(0)
    b.order(+1, 0.9, 0.995, None, 0, "")
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)
    trade = b.trades_frame().iloc[0]
    assert trade.exit_reason == "sl" and trade.exit_price == 0.995
    assert b.balance == pytest.approx(1000 - 0.005 * 90_000)


@pytest.mark.parametrize(("col", "value"), [(0, np.nan), (1, np.inf), (2, 0.0), (3, -1.0)])
def test_bars_with_unusable_prices_are_refused_naming_the_bar(col, value):
    rows = np.array([FLAT] * 4)
    rows[2, col] = value
    with pytest.raises(ValueError, match=r"bar 2 \(2024-01-01 02:00:00\+00:00\): (open|high|low|close)"):
        _broker(rows)


def test_closing_an_unknown_ticket_is_recorded_with_10036():
    b = _broker([FLAT], hedging=True)
    b.bar_open(0)
    b.order(+1, 0.1, None, None, 0, "")
    assert b.close(99, None) == 0
    assert b.rejected[-1]["retcode"] == 10036 and "#99" in b.rejected[-1]["reason"]
    assert len(b.open_positions) == 1


@pytest.mark.parametrize(
    ("lots", "retcode"), [(0.0, 10014), (-0.1, 10014), (math.nan, 10014), (0.015, 10014), (0.2, 10038)]
)
def test_closing_a_bad_volume_is_refused(lots, retcode):
    b = _broker([FLAT])
    b.bar_open(0)
    ticket = b.order(+1, 0.1, None, None, 0, "")
    assert _ea(b).close(ticket, lots=lots) == 0
    assert b.rejected[-1]["retcode"] == retcode and b.open_positions[0].lots == 0.1


@pytest.mark.parametrize(
    "setting",
    [
        {"leverage": math.inf},
        {"deposit": math.nan},
        {"swap_long": math.nan},
        {"commission": math.inf},
        {"lot_max": math.inf},
        {"stop_out_level": math.nan},
        {"contract_size": math.inf},
    ],
)
def test_account_settings_must_be_finite(setting):
    with pytest.raises(ValueError, match=f"invalid account setting {next(iter(setting))}="):
        AccountConfig(**setting)


def test_the_entry_commission_must_fit_in_the_free_margin_too():
    # 1,000 deposit: 0.5 lot needs 550 margin plus 500 commission: refused (it left a negative balance).
    b = _broker([FLAT], deposit=1000.0, commission=1000.0)
    b.bar_open(0)
    assert b.order(+1, 0.5, None, None, 0, "") is None and b.rejected[-1]["retcode"] == 10019
    assert b.balance == 1000.0
    assert b.order(+1, 0.2, None, None, 0, "") == 1 and b.balance == 800.0


def test_a_pending_order_exactly_at_the_market_is_refused_every_time_on_the_point_grid():
    """A limit or stop order at the quoted price itself is refused (10015). With the ask compared as the
    float open + spread, float noise let some of them through (62 of 6,668 in the audit): on the point grid
    every one is refused, and a stop exactly ``stops_level`` points away is always accepted."""
    n = 6_668
    rng = np.random.default_rng(21)
    opens = rng.integers(100_000, 160_000, n) / 100_000
    spreads = rng.integers(0, 31, n)
    rows = np.column_stack([opens, opens, opens, opens])
    b = _broker(rows, spread=0, deposit=1e9)  # stops level 0: only the sign of the distance counts
    levelled = _broker(rows, spread=0, deposit=1e9, stops_level=10)
    for broker in (b, levelled):
        broker.market.s = broker.market.s_open = broker.market.s_close = spreads.astype(float)  # points
    let_through, refused_stops = 0, 0
    for t in range(n):
        b.bar_open(t)
        levelled.bar_open(t)
        ask, bid = round(b.price(+1), 5), round(b.price(-1), 5)
        for kind, at in (("buy_stop", ask), ("buy_limit", ask), ("sell_stop", bid), ("sell_limit", bid)):
            if b.pending(kind, 0.01, at, None, None, None, None, 0, "") is not None:
                let_through += 1
                b.cancel(b.pending_orders[-1].ticket)
            else:
                assert b.last_retcode == 10015
        sl, tp = round(bid - 10 * POINT, 5), round(bid + 10 * POINT, 5)
        ticket = levelled.order(+1, 0.01, sl, tp, 0, "")
        if ticket is None:
            refused_stops += 1
        else:
            levelled.close(ticket, None)
    assert (let_through, refused_stops) == (0, 0)
