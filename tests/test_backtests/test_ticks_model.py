"""The "every tick" model: fills, pending orders and SL/TP worked through ticks, prices computed by hand."""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker import Broker
from backtests.paths import M1Path, ohlc_points
from backtests.ticks import TickPath
from datafeeds import resample, synthetic_candles
from datafeeds.ticks import TickDataError, TickMeta, bars_from_ticks, make_ticks
from strategies import ExpertAdvisor
from strategies.errors import EARuntimeError
from strategies.sma import SmaCrossEA

POINT = 1e-5
T0 = pd.Timestamp("2024-01-01", tz="UTC")
META = TickMeta("EURUSD", 5, "hand-made")


def _ticks(hours, spread=20 * POINT):
    """``hours[k]`` = [(seconds into hour k, bid), ...]; ask = bid + ``spread``."""
    ns, bid = [], []
    for k, hour in enumerate(hours):
        for sec, price in hour:
            ns.append((T0 + pd.Timedelta(hours=k, seconds=sec)).value)
            bid.append(price)
    bid = np.array(bid)
    return make_ticks(np.array(ns), bid, np.round(bid + spread, 5), META)


def _broker(hours, spread=20 * POINT):
    ticks = _ticks(hours, spread)
    h1 = bars_from_ticks(ticks, "H1")
    config = AccountConfig(deposit=100_000.0, missing_spread=0)
    b = Broker(*(h1[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(h1)), h1.index,
               POINT, config)  # fmt: skip
    b.attach_path(TickPath(h1.index, ticks, POINT, None))
    return b


def _run(b, actions):
    for t in range(len(b.opens)):
        b.bar_open(t)
        if t in actions:
            actions[t](b)
        b.bar_range(t)
    b.finish(len(b.opens) - 1)
    return b.trades_frame()


FLAT = [(0, 1.1000), (1800, 1.1000)]


def test_a_buy_stop_fills_at_the_ask_of_the_tick_that_reaches_it_and_records_that_time():
    hour = [(0, 1.1000), (10, 1.1010), (20, 1.1019), (30, 1.1030), (3599, 1.1025)]
    b = _broker([FLAT, hour])  # ask = bid + 20 points: 1.1021 at 01:00:20 is the first ask >= 1.1020
    trade = _run(b, {0: lambda b: b.pending("buy_stop", 1.0, 1.1020, None, None, None, None, 0, "")}).iloc[0]
    assert (trade.entry_bar, trade.entry_price) == (1, 1.1021)
    assert trade.entry_time == T0 + pd.Timedelta(hours=1, seconds=20)
    deals = b.deals_frame()
    assert deals.iloc[0].time == T0 + pd.Timedelta(hours=1, seconds=20)
    order = b.orders_frame().iloc[0]
    assert order.state == "filled" and order.time_done == T0 + pd.Timedelta(hours=1, seconds=20)
    assert order.time_setup == T0  # placed at the first bar's first tick (its opening time)


@pytest.mark.parametrize(
    ("hour", "reason", "price", "second"),
    [
        ([(0, 1.1000), (5, 1.1049), (6, 1.1052), (7, 1.0950)], "tp", 1.1052, 6),  # up first: TP, at the tick
        ([(0, 1.1000), (5, 1.0961), (6, 1.0955), (7, 1.1060)], "sl", 1.0955, 6),  # down first: SL
    ],
)
def test_sl_and_tp_inside_one_bar_the_tick_order_decides(hour, reason, price, second):
    b = _broker([FLAT, hour])
    trade = _run(b, {0: lambda b: b.order(+1, 1.0, 1.0960, 1.1050, 0, "")}).iloc[0]
    assert trade.entry_price == 1.1002  # the first tick's ask
    assert (trade.exit_bar, trade.exit_reason, trade.exit_price) == (1, reason, price)
    assert trade.exit_time == T0 + pd.Timedelta(hours=1, seconds=second)
    assert trade.profit == pytest.approx((price - 1.1002) * 100_000)


def test_a_short_is_stopped_at_the_ask():
    hour = [(0, 1.1000), (9, 1.1030), (10, 1.1041)]
    b = _broker([FLAT, hour])
    trade = _run(b, {0: lambda b: b.order(-1, 1.0, 1.1040, None, 0, "")}).iloc[0]
    # entry at the bid 1.1000; the ask 1.1043 at 01:00:10 is the first at or above the SL 1.1040
    assert (trade.entry_price, trade.exit_reason, trade.exit_price) == (1.1000, "sl", 1.1043)


def test_a_gap_through_a_pending_order():
    # The next bar opens with the ask at 1.0942, below the buy limit at 1.0960: filled there (a better price);
    # a sell stop at 1.0930 is jumped over from 1.0940 to 1.0920 and fills at that tick's bid.
    hour = [(0, 1.0940), (30, 1.0940), (31, 1.0920), (40, 1.0925)]
    b = _broker([FLAT, hour])

    def place(b):
        b.pending("buy_limit", 1.0, 1.0960, None, None, None, None, 0, "")
        b.pending("sell_stop", 2.0, 1.0930, None, None, None, None, 0, "")

    _run(b, {0: place})
    fills = b.deals_frame()
    assert list(fills.price[:2]) == [1.0942, 1.0920]
    assert list(fills.time[:2]) == [T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=1, seconds=31)]


@pytest.mark.parametrize(("expiry_second", "state"), [(30, "expired"), (31, "filled")])
def test_a_pending_order_expires_at_its_tick(expiry_second, state):
    hour = [(0, 1.1000), (29, 1.0990), (30, 1.0958), (45, 1.0970)]  # the ask 1.0960 at 01:00:30
    b = _broker([FLAT, hour])
    expiry = T0 + pd.Timedelta(hours=1, seconds=expiry_second)
    _run(b, {0: lambda b: b.pending("buy_limit", 1.0, 1.0960, None, None, None, expiry, 0, "")})
    order = b.orders_frame().iloc[0]
    assert order.state == state
    if state == "filled":
        assert order.fill_price == 1.0960 and order.time_done == T0 + pd.Timedelta(hours=1, seconds=30)
    else:
        assert order.time_done == T0 + pd.Timedelta(hours=1, seconds=30)


class _PartialOnTick(ExpertAdvisor):
    """Buys 1 lot at the first bar; closes half on the first tick with the bid at or above 1.1030 and moves
    the stop of the rest to the entry (a trailing step), all from on_tick."""

    min_study_bars = 0

    def on_bar(self):
        self.seen.append(("bar", self.time_current))
        if not self.positions() and not self.done:
            self.buy(1.0)

    def on_init(self):
        self.seen, self.done = [], False

    def on_tick(self, tick):
        if len(self.seen) < 3:
            self.seen.append(("tick", tick.time))
        pos = self.positions()
        if pos and not self.done and tick.bid >= 1.1030:
            self.close(pos[0].ticket, lots=0.5)
            self.modify(pos[0].ticket, sl=pos[0].price_open)
            self.done = True


def test_partial_close_and_a_stop_moved_in_on_tick():
    hours = [
        FLAT,
        FLAT,
        [(0, 1.1010), (10, 1.1029), (11, 1.1031), (12, 1.1040), (20, 1.1001), (30, 1.099)],
        FLAT,
    ]
    ticks = _ticks(hours)
    h1 = bars_from_ticks(ticks, "H1")
    acct = AccountConfig(deposit=100_000.0, missing_spread=0)
    r = Backtest(h1, _PartialOnTick, forward=None, model="ticks", ticks=ticks, account=acct).run()
    trades = r.trades.sort_values("exit_time").reset_index(drop=True)
    ea = r.ea_instance
    hour1 = T0 + pd.Timedelta(hours=1)  # the first forward bar: bar 0 is the history its decision sees
    assert ea.seen[:3] == [("bar", hour1), ("tick", hour1), ("tick", hour1 + pd.Timedelta(minutes=30))]
    # Entry at the first tick's ask 1.1002; half closed at the bid 1.1031 (02:00:11); the rest stopped at its
    # entry price 1.1002 by the tick 1.1001 at 02:00:20, at that tick's bid.
    assert list(trades.lots) == [0.5, 0.5]
    assert list(trades.exit_price) == [1.1031, 1.1001]
    assert list(trades.exit_reason) == ["signal", "sl"]
    assert list(trades.exit_time) == [T0 + pd.Timedelta(hours=2, seconds=s) for s in (11, 20)]
    assert r.trades.net_profit.sum() == pytest.approx(
        0.5 * (1.1031 - 1.1002) * 1e5 + 0.5 * (1.1001 - 1.1002) * 1e5
    )
    assert r.data["model_name"] == "Every tick based on real ticks" and r.data["history_quality"] == 100.0


def _m1_hours(minutes):
    """M1 bars of hand-made hours and ticks exactly at their OHLC path points (4 a minute, 15 s apart)."""
    rows, times = [], []
    for k, hour in enumerate(minutes):
        for j, row in enumerate(hour):
            rows.append(row)
            times.append(T0 + pd.Timedelta(hours=k, minutes=j))
    m1 = pd.DataFrame(rows, columns=["open", "high", "low", "close"], index=pd.DatetimeIndex(times))
    m1["spread"] = 0
    pts = ohlc_points(*(m1[c].to_numpy() for c in ("open", "high", "low", "close")))
    ns = (m1.index.as_unit("ns").asi8[:, None] + np.arange(4) * 15_000_000_000).ravel()
    ticks = make_ticks(ns, pts.ravel(), pts.ravel(), META)
    return m1, ticks


def _long_and_sell_stop(b):
    b.order(+1, 1.0, 1.0960, 1.1050, 0, "")
    b.pending("sell_stop", 1.0, 1.0960, None, None, None, None, 0, "")


def test_ohlc1m_and_ticks_agree_where_the_ticks_are_the_m1_path_points():
    # Levels at path points: the M1 path fills at the level, the ticks at the same price, in the same minute:
    # the TP 1.1050 is the first minute's high (after its low 1.0998), the sell stop 1.0960 the second's low.
    hour = [(1.1000, 1.1050, 1.0998, 1.1040), (1.1040, 1.1041, 1.0960, 1.0970)]
    m1, ticks = _m1_hours([[(1.1000, 1.1000, 1.1000, 1.1000)], hour])
    out = []
    for attach in (lambda b: b.attach_path(M1Path(b.time, m1, POINT, None)),
                   lambda b: b.attach_path(TickPath(b.time, ticks, POINT, None))):  # fmt: skip
        h1 = bars_from_ticks(ticks, "H1")
        b = Broker(*(h1[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(h1)), h1.index,
                   POINT, AccountConfig(deposit=100_000.0, missing_spread=0))  # fmt: skip
        attach(b)
        out.append(_run(b, {0: _long_and_sell_stop}))
    cols = ["entry_price", "exit_price", "exit_reason"]
    pd.testing.assert_frame_equal(out[0][cols], out[1][cols])
    # The M1 path records the minute, the ticks their own time (15 s apart on this path).
    for col in ("entry_time", "exit_time"):
        assert (out[0][col] == out[1][col].dt.floor("min")).all()
    assert list(out[0].exit_reason) == ["tp", "end of test"]


def test_ohlc1m_and_ticks_take_the_same_trades_on_synthetic_path_points():
    m1 = synthetic_candles("EURUSD", "M1", bars=15 * 1440, seed=11, start="2024-01-01")
    h1 = resample(m1, "H1")
    pts = ohlc_points(*(m1[c].to_numpy() for c in ("open", "high", "low", "close")))
    ns = (m1.index.as_unit("ns").asi8[:, None] + np.arange(4) * 15_000_000_000).ravel()
    ticks = make_ticks(ns, pts.ravel(), pts.ravel() + 10 * POINT, META)
    acct = AccountConfig(deposit=1e7, spread=10)
    params = {"sl_points": 60, "tp_points": 90}
    fine = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=m1, account=acct).run(**params).trades
    tick = (
        Backtest(h1, SmaCrossEA, forward=None, model="ticks", ticks=ticks, account=acct).run(**params).trades
    )
    assert len(fine) > 12 and (fine.exit_reason.isin(["sl", "tp"])).sum() > 8
    same = ["type", "entry_time", "entry_price", "exit_reason", "sl", "tp"]
    pd.testing.assert_frame_equal(fine[same], tick[same])
    # Exits in the same minute; a tick fills at its own price, at or beyond the level it reached.
    assert (fine.exit_time.dt.floor("min") == tick.exit_time.dt.floor("min")).all()
    long_ = tick.type == "buy"
    worse = np.where(
        long_, tick.exit_price <= fine.exit_price + 1e-9, tick.exit_price >= fine.exit_price - 1e-9
    )
    better = np.where(
        long_, tick.exit_price >= fine.exit_price - 1e-9, tick.exit_price <= fine.exit_price + 1e-9
    )
    assert worse[tick.exit_reason == "sl"].all() and better[tick.exit_reason == "tp"].all()


class _Boom(ExpertAdvisor):
    min_study_bars = 0

    def on_tick(self, tick):
        if tick.bid > 1.1005:
            raise ZeroDivisionError("boom")


def test_on_tick_failures_name_the_hook_and_the_tick():
    ticks = _ticks([FLAT, [(0, 1.1000), (7, 1.1006)], FLAT])
    h1 = bars_from_ticks(ticks, "H1")
    with pytest.raises(EARuntimeError, match=r"on_tick.*2024-01-01 01:00:07"):
        Backtest(h1, _Boom, forward=None, model="ticks", ticks=ticks).run()


def test_ticks_outside_the_bars_or_out_of_order_are_refused():
    ticks = _ticks([FLAT, [(0, 1.1000)]])
    h1 = bars_from_ticks(ticks, "H1")
    with pytest.raises(TickDataError, match="outside the bars"):
        TickPath(h1.index[1:], ticks, POINT, None)
    with pytest.raises(TickDataError, match="out of time order"):
        TickPath(h1.index, ticks.iloc[::-1], POINT, None)
    dup = make_ticks(np.array([T0.value, T0.value]), np.array([1.1, 1.1001]), np.array([1.1, 1.1002]), META)
    assert TickPath(h1.index, dup, POINT, None).covers(0)  # equal times are legal


def test_bars_without_ticks_fall_back_to_their_own_ohlc_and_lower_the_quality():
    ticks = _ticks([FLAT, [(0, 1.1000), (30, 1.0990)], [(0, 1.0995)], [(0, 1.0990)]])
    h1 = bars_from_ticks(ticks, "H1")
    sparse = ticks[ticks.index < T0 + pd.Timedelta(hours=2)]
    r = Backtest(h1, SmaCrossEA, forward=None, model="ticks", ticks=sparse).run()
    # Forward bars 1..3 (bar 0 is the history the first decision sees); bar 1 has ticks.
    assert r.data["forward_first"] == str(h1.index[1])
    assert r.data["history_quality"] == 33.33 and r.data["history_quality_of"] == "ticks"


def test_a_tick_through_the_stop_out_price_closes_everything_at_that_tick():
    # 1 lot bought at the ask 1.1002, 1,200 deposit at 1:100: margin 1,100.20, so the 50 % level is crossed
    # where 1,200 + (bid - 1.1002) * 100,000 <= 550.10, i.e. bid <= 1.093701: the tick at 1.0930 (01:00:20).
    ticks = _ticks([FLAT, [(0, 1.0990), (10, 1.0950), (20, 1.0930), (30, 1.0900)]])
    h1 = bars_from_ticks(ticks, "H1")
    config = AccountConfig(deposit=1_200.0, missing_spread=0)
    b = Broker(*(h1[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(h1)), h1.index,
               POINT, config)  # fmt: skip
    b.attach_path(TickPath(h1.index, ticks, POINT, None))
    trade = _run(b, {0: lambda b: b.order(+1, 1.0, None, None, 0, "")}).iloc[0]
    assert (trade.exit_reason, trade.exit_price) == ("stop out", 1.0930)
    assert trade.exit_time == T0 + pd.Timedelta(hours=1, seconds=20)


def test_ohlc1m_records_a_fill_inside_a_bar_at_its_minute():
    hour = [
        (1.1000, 1.1005, 1.0995, 1.1000),
        (1.1000, 1.1003, 1.0990, 1.0992),
        (1.0992, 1.0995, 1.0950, 1.0960),
    ]
    m1, _ = _m1_hours([[(1.1000, 1.1000, 1.1000, 1.1000)], hour])
    h1 = resample(m1.assign(tick_volume=1).pipe(_as_candles), "H1")
    b = Broker(*(h1[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(h1)), h1.index,
               POINT, AccountConfig(deposit=100_000.0, missing_spread=0))  # fmt: skip
    b.attach_path(M1Path(h1.index, m1, POINT, None))
    trade = _run(b, {0: lambda b: b.order(+1, 1.0, 1.0970, None, 0, "")}).iloc[0]
    assert (trade.exit_reason, trade.exit_price, trade.exit_bar) == ("sl", 1.0970, 1)
    assert trade.exit_time == T0 + pd.Timedelta(hours=1, minutes=2)  # the third minute, not the bar's 01:00
    assert b.deals_frame().time.iloc[-1] == T0 + pd.Timedelta(hours=1, minutes=2)


def _as_candles(df):
    from datafeeds import UTC, CandleMeta, Timeframe, make_frame

    data = {c: df[c].to_numpy() for c in ("open", "high", "low", "close")}
    data["spread"] = np.zeros(len(df), dtype=np.int32)
    return make_frame(data, df.index.tz_localize("UTC") if df.index.tz is None else df.index,
                      CandleMeta("EURUSD", Timeframe.M1, 5, UTC, "hand-made"))  # fmt: skip


class _StopFromTick(ExpertAdvisor):
    """Places a buy stop 100 points above the ask at 01:00:05 (from on_tick) and a sell stop-limit."""

    min_study_bars = 0

    def on_tick(self, tick):
        if tick.time == T0 + pd.Timedelta(hours=1, seconds=5):
            self.buy_stop(1.0, round(tick.ask + 100 * self.point, 5))
            self.sell_stop_limit(1.0, 1.0980, 1.0990)


def test_orders_placed_in_on_tick_are_searched_from_the_next_tick():
    # ask 1.1004 at 01:00:05: the buy stop at 1.1014 is reached by the ask 1.1017 at 01:00:07; then the bid
    # falls to 1.0975 (01:00:09), reaching the stop-limit's stop 1.0980: its sell limit at 1.0990 is placed
    # and filled by the next tick (bid 1.0995 at 01:00:10), at that bid; with netting it closes the long.
    hours = [FLAT, [(0, 1.1000), (5, 1.1002), (6, 1.1010), (7, 1.1015), (9, 1.0975), (10, 1.0995)], FLAT]
    ticks = _ticks(hours)
    h1 = bars_from_ticks(ticks, "H1")
    r = Backtest(h1, _StopFromTick, forward=None, model="ticks", ticks=ticks,
                 account=AccountConfig(deposit=100_000.0, missing_spread=0)).run()  # fmt: skip
    trade = r.trades.iloc[0]
    assert (trade.entry_price, trade.exit_price) == (1.1017, 1.0995)
    assert trade.entry_time == T0 + pd.Timedelta(hours=1, seconds=7)
    assert trade.exit_time == T0 + pd.Timedelta(hours=1, seconds=10)


def test_a_hedged_account_is_stopped_out_by_a_tick_whose_spread_is_wide_enough():
    # Long 1 lot at 1.1002, short 1 lot at 1.1000 (hedging; the hedged pair charged as two lots: a hedged
    # margin of twice the contract size), 2,300 deposit at 1:100: margin 2,200.20, equity
    # 2,300 + (1.1000 - 1.1002 - spread) * 100,000, so the 50 % level is crossed at a spread of 0.011799:
    # no price moves this equity, only the spread. The tick at 01:00:20 (spread 0.0150) crosses it: the short
    # loses most there (-1,500 at the ask 1.1150) and is closed first; the long alone then holds 1,100.20 on
    # 2,300 - 1,500 - 20 = 780 (71 %) and stays open to the end.
    ns = [
        (T0 + pd.Timedelta(hours=h, seconds=s)).value for h, s in ((0, 0), (0, 60), (1, 0), (1, 10), (1, 20))
    ]
    bid = np.array([1.1000, 1.1000, 1.1000, 1.1000, 1.1000])
    ask = np.array([1.1002, 1.1002, 1.1002, 1.1100, 1.1150])  # spreads 0.0002, ..., 0.0100, 0.0150
    ticks = make_ticks(np.array(ns), bid, ask, META)
    h1 = bars_from_ticks(ticks, "H1")
    config = AccountConfig(deposit=2_300.0, missing_spread=0, hedging=True, margin_hedged=200_000.0)
    b = Broker(*(h1[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(h1)), h1.index,
               POINT, config)  # fmt: skip
    b.attach_path(TickPath(h1.index, ticks, POINT, None))
    trades = _run(
        b, {0: lambda b: (b.order(+1, 1.0, None, None, 0, ""), b.order(-1, 1.0, None, None, 0, ""))}
    )
    assert list(zip(trades.type, trades.exit_reason, trades.exit_price, strict=True)) == [
        ("sell", "stop out", 1.1150),  # the short at the ask
        ("buy", "end of test", 1.1000),
    ]
    assert trades.exit_time.iloc[0] == T0 + pd.Timedelta(hours=1, seconds=20)


class _SeesItsOrder(_StopFromTick):
    def on_tick(self, tick):
        super().on_tick(tick)
        if self.orders() and not hasattr(self, "setup"):
            self.setup = [o.time_setup for o in self.orders()]


def test_an_on_tick_ea_in_another_model_is_warned_and_its_orders_show_the_tick_they_were_placed_at(caplog):
    ticks = _ticks([FLAT, [(0, 1.1000), (5, 1.1002), (6, 1.1003)], FLAT])
    h1 = bars_from_ticks(ticks, "H1")
    Backtest(h1, _SeesItsOrder, forward=None).run()
    assert "on_tick runs only with model 'ticks'" in caplog.text
    r = Backtest(h1, _SeesItsOrder, forward=None, model="ticks", ticks=ticks).run()
    placed = T0 + pd.Timedelta(hours=1, seconds=5)
    assert r.ea_instance.setup == [placed, placed]
    assert list(r.orders.time_setup) == [placed, placed]


def test_one_backtest_checks_its_ticks_once_and_each_run_starts_clean():
    """Passes of an optimisation share one ``Backtest``: its tick path is built and checked at construction
    (bad ticks fail before any run), and each run gets its own copy with its own EA hook and caches."""
    from datafeeds.synthetic_ticks import synthetic_ticks

    m1 = synthetic_candles("EURUSD", "M1", 3 * 1440, seed=4)
    h1 = resample(m1, "H1")
    ticks = synthetic_ticks(m1, seed=2, ticks_per_minute=4)
    seen: list[int] = []

    class Counting(SmaCrossEA):
        def on_tick(self, tick):
            seen.append(1)

    bt = Backtest(h1, Counting, model="ticks", ticks=ticks)
    first = bt.run(fast=3, slow=8)
    ticks_in_first = len(seen)
    second = bt.run(fast=3, slow=8)
    assert ticks_in_first > 0 and len(seen) == 2 * ticks_in_first
    pd.testing.assert_frame_equal(first.trades, second.trades)
    assert first.stats.equals(second.stats)
    assert bt.price_path.hook is None  # the runs' hooks stayed on their copies

    crossed = ticks.copy()
    crossed.iloc[10, crossed.columns.get_loc("ask")] = crossed["bid"].iloc[10] - 1e-4
    with pytest.raises(TickDataError):
        Backtest(h1, SmaCrossEA, model="ticks", ticks=crossed)


def test_an_order_expires_by_the_time_of_the_bars_first_tick():
    """A buy limit expiring at 01:00:10 is gone when the next bar's first tick comes at 01:00:30, although
    the bar opened at 01:00:00: MetaTrader deletes an order once the time reaches its expiration, so that
    tick (at the limit) does not fill it."""
    b = _broker([[(0, 1.1000), (1800, 1.1000)], [(30, 1.0950), (60, 1.0950)]])
    expiry = T0 + pd.Timedelta(hours=1, seconds=10)
    trades = _run(b, {0: lambda b: b.pending("buy_limit", 1.0, 1.0970, None, None, None, expiry, 0, "")})
    assert not len(trades)
    order = b.orders_frame().iloc[0]
    assert order.state == "expired" and order.time_done == T0 + pd.Timedelta(hours=1, seconds=30)
