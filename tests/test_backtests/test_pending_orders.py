"""Pending orders and position management, hand-computed with exact prices (spread 10 points)."""

import math

import numpy as np
import pandas as pd
import pytest

from backtests.broker import AccountConfig, Broker
from strategies import ExpertAdvisor

POINT = 1e-5
SPREAD = 10
FLAT = (1.1, 1.1, 1.1, 1.1)


def _broker(rows, freq="h", **cfg):
    a = np.array(rows, dtype=float)
    time = pd.date_range("2024-01-01", periods=len(a), freq=freq, tz="UTC")
    config = AccountConfig(**{"deposit": 100_000.0, **cfg})
    return Broker(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), SPREAD), time, POINT, config)


def _ea(b):
    ea = ExpertAdvisor()
    ea.attach(b, None)
    return ea


def _run(b, actions=None):
    """Replay every bar; ``actions[t](ea)`` runs at bar t's open, as on_bar does."""
    ea = _ea(b)
    for t in range(len(b.opens)):
        b.bar_open(t)
        if actions and t in actions:
            actions[t](ea)
        b.bar_range(t)
    b.finish(len(b.opens) - 1)
    return ea


def test_a_buy_stop_triggered_inside_a_bar_fills_at_its_price_and_its_tp_then_counts():
    rows = [
        (1.1000, 1.1010, 1.0995, 1.1005),  # ask high 1.1011 < 1.1020: not yet
        (1.1005, 1.1030, 1.1000, 1.1025),  # ask high 1.1031 >= 1.1020: filled at 1.1020
        (1.1025, 1.1065, 1.1022, 1.1050),  # bid high 1.1065 >= tp 1.1060
    ]
    b = _broker(rows)
    _run(b, {0: lambda ea: ea.buy_stop(1.0, 1.1020, sl=1.0990, tp=1.1060, magic=7, comment="breakout")})
    trade = b.trades_frame().iloc[0]
    assert (trade.entry_bar, trade.entry_price, trade.exit_bar, trade.exit_reason) == (1, 1.1020, 2, "tp")
    assert trade.exit_price == 1.1060 and trade.profit == pytest.approx(0.0040 * 100_000)
    assert trade.ticket == 1 and trade.magic == 7 and trade.comment == "breakout"
    orders = b.orders_frame()
    pending = orders[orders.type == "buy_stop"].iloc[0]
    assert pending.state == "filled" and pending.fill_price == 1.1020 and pending.position == 1
    assert pending.time_done == b.time[1]
    deals = b.deals_frame()
    assert list(deals.entry) == ["in", "out"] and list(deals.price) == [1.1020, 1.1060]
    assert deals.balance.iloc[-1] == pytest.approx(100_000 + 400.0)


@pytest.mark.parametrize(
    ("place", "fill"),
    [
        (lambda ea: ea.sell_stop(1.0, 1.0950), 1.0900),  # stop gapped through: the open, the worse price
        (lambda ea: ea.buy_limit(1.0, 1.0950), 1.0901),  # limit gapped beyond: the open ask, the better price
        (lambda ea: ea.buy_stop(1.0, 1.1050), 1.1201),  # gap up through a buy stop: the open ask
        (lambda ea: ea.sell_limit(1.0, 1.1050), 1.1200),  # gap up beyond a sell limit: the open bid
    ],
)
def test_a_gap_through_a_pending_order_fills_at_the_open(place, fill):
    down, up = (1.0900, 1.0920, 1.0890, 1.0910), (1.1200, 1.1210, 1.1190, 1.1200)
    gapped = down if fill < 1.1 else up
    b = _broker([FLAT, gapped])
    _run(b, {0: place})
    trade = b.trades_frame().iloc[0]
    assert trade.entry_bar == 1 and trade.entry_price == pytest.approx(fill, abs=1e-12)


def test_a_limit_order_inside_a_bar_fills_at_its_price():
    b = _broker([FLAT, (1.1000, 1.1005, 1.0940, 1.0990)])
    _run(b, {0: lambda ea: ea.buy_limit(1.0, 1.0950)})  # ask low 1.0941 <= 1.0950
    assert b.trades_frame().iloc[0].entry_price == 1.0950


def test_a_stop_limit_places_its_limit_and_fills_from_the_next_bar():
    rows = [
        FLAT,
        (1.1000, 1.1030, 1.1000, 1.1025),  # the stop at 1.1020 is reached (ask 1.1031): a buy limit at 1.1010
        (1.1025, 1.1030, 1.1005, 1.1020),  # ask low 1.1006 <= 1.1010: filled at 1.1010
    ]
    b = _broker(rows)
    seen = {}
    _run(b, {0: lambda ea: ea.buy_stop_limit(1.0, 1.1020, 1.1010), 2: lambda ea: seen.update(o=ea.orders())})
    trade = b.trades_frame().iloc[0]
    assert trade.entry_bar == 2 and trade.entry_price == 1.1010
    assert b.orders_frame().iloc[0].type == "buy_stop_limit"


def test_orders_expire_today_or_at_a_given_time():
    # 4-hour bars: six a day. The first day's bars never reach 1.0950; the seventh bar (next day) does.
    low = (1.1000, 1.1000, 1.0900, 1.1000)
    b = _broker([FLAT] * 6 + [low] * 2, freq="4h")
    _run(
        b,
        {
            0: lambda ea: (
                ea.buy_limit(1.0, 1.0950, expiration="today"),
                ea.buy_limit(1.0, 1.0950, expiration=b.time[7]),  # still alive at bar 6, whose low fills it
                ea.buy_limit(1.0, 1.0950, expiration=b.time[6]),  # expires at bar 6's open
            )
        },
    )
    orders = b.orders_frame().query("type == 'buy_limit'").set_index("ticket")
    assert list(orders.state) == ["expired", "filled", "expired"]
    assert orders.loc[1, "time_done"] == b.time[6] and orders.loc[3, "time_done"] == b.time[6]
    assert orders.loc[1, "expiration"] == pd.Timestamp("2024-01-02", tz="UTC")
    assert b.trades_frame().iloc[0].entry_bar == 6


def test_partial_close_by_volume_splits_money_and_commission():
    b = _broker([FLAT, (1.1050, 1.1050, 1.1050, 1.1050), (1.1070, 1.1070, 1.1070, 1.1070)], commission=5.0)
    ticket = {}
    _run(
        b,
        {
            0: lambda ea: ticket.update(t=ea.buy(1.0)),  # at the ask 1.1001
            1: lambda ea: ea.close(ticket["t"], lots=0.4),  # 0.4 at the bid 1.1050
        },
    )
    first, rest = b.trades_frame().itertuples()
    assert (first.lots, first.exit_price, rest.lots, rest.exit_price) == (0.4, 1.1050, 0.6, 1.1070)
    assert first.profit == pytest.approx(0.0049 * 0.4 * 100_000)
    assert first.commission == pytest.approx(-(0.4 * 5 + 0.4 * 5)) and rest.commission == pytest.approx(-6.0)
    assert rest.profit == pytest.approx(0.0069 * 0.6 * 100_000)


def test_close_by_saves_one_spread_on_a_hedging_account():
    b = _broker([FLAT, (1.1050, 1.1050, 1.1050, 1.1050), (1.1050, 1.1050, 1.1050, 1.1050)], hedging=True)
    t = {}
    _run(
        b,
        {
            0: lambda ea: t.update(buy=ea.buy(1.0)),  # at 1.1001
            1: lambda ea: (t.update(sell=ea.sell(0.5)), t.update(ok=ea.close_by(t["buy"], t["sell"]))),
        },
    )
    assert t["ok"]
    trades = b.trades_frame()
    by = trades[trades.exit_reason == "close by"]
    # The buy's 0.5 closes at the sell's price 1.1050: +245; the sell closes at its own price: 0.
    assert list(by.type) == ["buy", "sell"] and list(by.exit_price) == [1.1050, 1.1050]
    assert by.profit.sum() == pytest.approx(0.0049 * 0.5 * 100_000)
    assert list(b.deals_frame().entry) == ["in", "in", "out_by", "out_by", "out"]
    rest = trades[trades.exit_reason == "end of test"].iloc[0]
    assert rest.lots == 0.5 and rest.type == "buy"


@pytest.mark.parametrize(
    ("call", "retcode"),
    [
        (lambda ea, t: ea.close_by(t, t), 10013),
        (lambda ea, t: ea.close_by(t, 99), 10036),
    ],
)
def test_close_by_refusals(call, retcode):
    b = _broker([FLAT], hedging=True)
    b.bar_open(0)
    ea = _ea(b)
    t = ea.buy(1.0)
    assert call(ea, t) is False and ea.last_retcode == retcode == b.rejected[-1]["retcode"]


def test_close_by_needs_a_hedging_account():
    b = _broker([FLAT])
    b.bar_open(0)
    assert _ea(b).close_by(1, 2) is False and b.rejected[-1]["retcode"] == 10013


def test_modify_moves_stops_and_refuses_what_the_server_refuses():
    b = _broker([FLAT, (1.1, 1.1, 1.0985, 1.1)])
    b.bar_open(0)
    ea = _ea(b)
    t = ea.buy(1.0, sl=1.0950)
    assert ea.modify(t, sl=1.0990) and b.positions()[0].sl == 1.0990 and ea.last_retcode == 10009
    assert not ea.modify(t, sl=1.0990) and ea.last_retcode == 10025  # no changes
    assert not ea.modify(t, sl=1.1005) and ea.last_retcode == 10016  # above the bid
    assert not ea.modify(t, tp=math.nan) and ea.last_retcode == 10016
    assert not ea.modify(99, sl=1.09) and ea.last_retcode == 10036
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)
    trade = b.trades_frame().iloc[0]
    assert trade.exit_reason == "sl" and trade.exit_price == 1.0990


def test_modify_inside_the_freeze_level_is_refused_with_10029():
    b = _broker([FLAT], freeze_level=20)
    b.bar_open(0)
    ea = _ea(b)
    t = ea.buy(1.0, sl=1.0999)  # 10 points below the bid: within the freeze level of 20
    assert ea.modify(t, sl=1.0950) is False and ea.last_retcode == 10029
    o = ea.buy_limit(1.0, 1.0999)  # 20 points below the ask
    assert ea.cancel(o) is False and ea.last_retcode == 10029
    assert ea.modify_order(o, price=1.0900) is False and ea.last_retcode == 10029


def test_modify_zero_removes_a_stop():
    b = _broker([FLAT, (1.1, 1.1, 1.0, 1.1)])
    b.bar_open(0)
    ea = _ea(b)
    t = ea.buy(1.0, sl=1.0950, tp=1.2)
    assert ea.modify(t, sl=0) and b.positions()[0].sl is None and b.positions()[0].tp == 1.2
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)
    assert b.open_positions


@pytest.mark.parametrize(
    ("call", "retcode", "words"),
    [
        (lambda ea: ea.buy_limit(1.0, 1.1005), 10015, "must lie below the ask"),
        (lambda ea: ea.sell_limit(1.0, 1.0995), 10015, "must lie above the bid"),
        (lambda ea: ea.buy_stop(1.0, 1.1), 10015, "must lie above the ask"),
        (lambda ea: ea.sell_stop(1.0, 1.1001), 10015, "must lie below the bid"),
        (lambda ea: ea.buy_stop(1.0, math.nan), 10015, "invalid price nan"),
        (lambda ea: ea.buy_stop(1.0, -1.0), 10015, "invalid price -1.0"),
        (lambda ea: ea.buy_stop_limit(1.0, 1.102, 1.103), 10015, "must lie beyond its trigger"),
        (lambda ea: ea.buy_limit(1.0, 1.09, sl=1.0901), 10016, "below the order price 1.09"),
        (lambda ea: ea.sell_stop(1.0, 1.09, tp=1.0905), 10016, "below the order price 1.09"),
        (lambda ea: ea.buy_limit(math.nan, 1.09), 10014, "invalid volume nan"),
        (lambda ea: ea.buy_limit(1.0, 1.09, expiration="2023-12-31"), 10022, "not after the current time"),
        (lambda ea: ea.cancel(42), 10013, "no pending order #42"),
        (lambda ea: ea.modify_order(42, price=1.0), 10013, "no pending order #42"),
    ],
)
def test_pending_requests_the_server_refuses(call, retcode, words):
    b = _broker([FLAT], stops_level=0)
    b.bar_open(0)
    ea = _ea(b)
    assert not call(ea)
    assert ea.last_retcode == retcode and b.rejected[-1]["retcode"] == retcode
    assert words in b.rejected[-1]["reason"]
    assert not b.pending_orders


def test_the_stops_level_keeps_pending_prices_away_from_the_market():
    b = _broker([FLAT], stops_level=30)
    b.bar_open(0)
    ea = _ea(b)
    assert ea.buy_stop(1.0, 1.1001 + 29 * POINT) is None and ea.last_retcode == 10015
    assert ea.buy_stop(1.0, 1.1001 + 30 * POINT) == 1 and ea.last_retcode == 10008


def test_cancel_and_modify_order_and_the_orders_list():
    b = _broker([FLAT, (1.1, 1.1, 1.0930, 1.1)])
    b.bar_open(0)
    ea = _ea(b)
    keep, gone = ea.buy_limit(1.0, 1.0950, comment="a"), ea.sell_stop(1.0, 1.0900)
    assert [o.kind for o in ea.orders()] == ["buy_limit", "sell_stop"] and ea.orders()[0].comment == "a"
    assert ea.cancel(gone) and [o.ticket for o in ea.orders()] == [keep]
    assert not ea.modify_order(keep) and ea.last_retcode == 10025
    assert ea.modify_order(keep, price=1.0940, sl=1.0900, expiration="today")
    order = ea.orders()[0]
    assert (order.price, order.sl, order.expiration) == (1.0940, 1.0900, pd.Timestamp("2024-01-02", tz="UTC"))
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)  # ask low 1.0931 <= 1.0940
    assert b.positions()[0].price_open == 1.0940 and b.positions()[0].sl == 1.0900
    states = b.orders_frame().set_index("ticket").state
    assert states[keep] == "filled" and states[gone] == "canceled"


def test_a_triggered_order_without_the_margin_is_rejected_with_10019():
    b = _broker([FLAT, (1.1, 1.1, 1.09, 1.1)], deposit=1000.0)
    _run(b, {0: lambda ea: ea.buy_limit(5.0, 1.0950)})
    assert not len(b.trades_frame()) and b.rejected[-1]["retcode"] == 10019
    assert b.orders_frame().iloc[0].state == "rejected"


def test_a_limit_fill_on_a_netting_account_reduces_the_opposite_position():
    b = _broker([FLAT, (1.1, 1.1, 1.09, 1.1)])
    _run(b, {0: lambda ea: (ea.sell(1.0), ea.buy_limit(0.4, 1.0950))})
    first = b.trades_frame().iloc[0]
    assert (first.type, first.lots, first.exit_price, first.exit_bar) == ("sell", 0.4, 1.0950, 1)


def test_pending_orders_left_at_the_end_are_listed_as_cancelled():
    # MetaTrader's tester deletes them at the end of the test.
    b = _broker([FLAT, FLAT])
    _run(b, {0: lambda ea: ea.buy_limit(1.0, 1.0)})
    assert b.orders_frame().iloc[0].state == "canceled"


@pytest.mark.parametrize("naive_bars", [False, True])
def test_expiration_times_with_or_without_a_zone_compare_with_the_bars(naive_bars):
    b = _broker([FLAT] * 4)
    if naive_bars:
        b.market.time = b.market.time.tz_localize(None)
    b.bar_open(0)
    ea = _ea(b)
    assert ea.buy_limit(1.0, 1.0, expiration="2024-01-01 02:00") == 1
    assert ea.buy_limit(1.0, 1.0, expiration=pd.Timestamp("2024-01-01 02:00", tz="UTC")) == 2
    for t in (1, 2):
        b.bar_range(t - 1)
        b.bar_open(t)
    assert not b.pending_orders


def test_after_a_limit_fill_inside_a_bar_its_sl_counts_there_but_its_tp_from_the_next_bar():
    # Bar 1 reaches 1.1100 and 1.0900: the high may have come before the dip that filled the buy limit.
    wide = (1.1000, 1.1100, 1.0940, 1.1000)
    b = _broker([FLAT, wide, wide])
    _run(b, {0: lambda ea: ea.buy_limit(1.0, 1.0950, tp=1.1050)})
    trade = b.trades_frame().iloc[0]
    assert (trade.entry_bar, trade.exit_bar, trade.exit_reason, trade.exit_price) == (1, 2, "tp", 1.1050)
    b = _broker([FLAT, (1.1000, 1.1100, 1.0900, 1.1000)])
    _run(b, {0: lambda ea: ea.buy_limit(1.0, 1.0950, sl=1.0920, tp=1.1050)})
    trade = b.trades_frame().iloc[0]  # the dip through 1.0950 went on to 1.0900: the SL was reached
    assert (trade.entry_bar, trade.exit_bar, trade.exit_reason, trade.exit_price) == (1, 1, "sl", 1.0920)


def test_after_a_stop_fill_inside_a_bar_its_tp_counts_there():
    b = _broker([FLAT, (1.1000, 1.1100, 1.0990, 1.1050)])
    _run(b, {0: lambda ea: ea.buy_stop(1.0, 1.1020, tp=1.1080)})
    trade = b.trades_frame().iloc[0]
    assert (trade.entry_bar, trade.exit_bar, trade.exit_reason, trade.exit_price) == (1, 1, "tp", 1.1080)


def test_no_negative_zero_commission_in_the_tables():
    b = _broker([FLAT, FLAT])
    _run(b, {0: lambda ea: ea.buy(1.0)})
    for values in (b.deals_frame().commission, b.trades_frame().commission):
        assert not np.signbit(values.to_numpy()).any()


@pytest.mark.parametrize(
    ("place", "bar", "reason", "exit_price"),
    [
        # A buy limit at 1.0950 (SL 1.0900) gapped to 1.0850: filled at the ask 1.0851, beyond its SL at once.
        (lambda ea: ea.buy_limit(1.0, 1.0950, sl=1.0900), (1.0850, 1.0860, 1.0840, 1.0855), "sl", 1.0850),
        # A buy stop at 1.1050 (TP 1.1100) gapped to 1.1200: filled at 1.1201, already beyond its TP.
        (lambda ea: ea.buy_stop(1.0, 1.1050, tp=1.1100), (1.1200, 1.1210, 1.1190, 1.1200), "tp", 1.1200),
        # A sell stop at 1.0950 (TP 1.0900) gapped to 1.0850: filled at the bid, beyond its TP (ask 1.0851).
        (lambda ea: ea.sell_stop(1.0, 1.0950, tp=1.0900), (1.0850, 1.0860, 1.0840, 1.0855), "tp", 1.0851),
    ],
)
def test_a_gap_fill_beyond_its_own_stops_closes_at_the_open_not_at_the_level(place, bar, reason, exit_price):
    b = _broker([FLAT, bar])
    _run(b, {0: place})
    trade = b.trades_frame().iloc[0]
    assert (trade.exit_bar, trade.exit_reason) == (1, reason)
    assert trade.exit_price == pytest.approx(exit_price, abs=1e-12)
    assert trade.profit == pytest.approx(-0.0001 * 100_000)  # the spread, nothing more


def test_today_expires_at_the_servers_midnight_as_order_time_day_does():
    """``expiration="today"`` is MetaTrader's ORDER_TIME_DAY, which the live terminal is sent: the end of the
    server day. On a UTC+2 server an order placed at 21:00 UTC (23:00 there) expires at 22:00 UTC, so the
    dip of the 23:00 bar does not fill it (with "today" read as 00:00 UTC it did)."""
    from datafeeds import BrokerClock

    rows = [FLAT, FLAT, (1.1, 1.1, 1.0900, 1.1), FLAT]
    a = np.array(rows, dtype=float)
    time = pd.date_range("2024-01-01 21:00", periods=len(a), freq="h", tz="UTC")
    config = AccountConfig(deposit=100_000.0)
    b = Broker(*a.T, np.full(len(a), SPREAD), time, POINT, config, BrokerClock(2))
    ea = _ea(b)
    b.bar_open(0)
    ticket = ea.buy_limit(1.0, 1.0950, expiration="today")
    assert ea.orders()[0].expiration == pd.Timestamp("2024-01-01 22:00", tz="UTC")
    b.bar_range(0)
    for t in range(1, len(a)):
        b.bar_open(t)
        b.bar_range(t)
    order = b.orders_frame().set_index("ticket").loc[ticket]
    assert order.state == "expired" and order.time_done == time[1] and not len(b.trades_frame())


def test_a_stop_the_market_passed_when_the_order_filled_closes_at_the_market_not_at_its_level():
    """A sell limit at 1.11616 with its stop-loss 9 points above and a 10-point spread: when the bid reaches
    1.11616 the ask is 1.11626, already beyond the stop at 1.11625. A stop-loss is a market order once
    reached: the short closes at 1.11626 (-10.00), not at the level 1.11625 (-9.00) that the market had
    passed before the position existed."""
    rows = [(1.11600,) * 4, (1.11600, 1.11640, 1.11600, 1.11630)]
    b = _broker(rows)
    _run(b, {0: lambda ea: ea.sell_limit(1.0, 1.11616, sl=1.11625)})
    trade = b.trades_frame().iloc[0]
    assert (trade.type, trade.entry_price, trade.exit_price, trade.exit_reason) == (
        "sell",
        1.11616,
        1.11626,
        "sl",
    )
    assert trade.profit == pytest.approx(-10.0, abs=1e-9)
