"""The "1 minute OHLC" model: fills worked through M1 bars in MetaTrader's OHLC order, hand-computed."""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker import Broker
from backtests.paths import M1Path, ohlc_points
from datafeeds import read_mt5_csv, resample, synthetic_candles, write_mt5_csv
from datafeeds.candles import CandleMeta, make_frame
from datafeeds.timeframes import Timeframe
from strategies import ExpertAdvisor
from strategies.sma import SmaCrossEA

POINT = 1e-5


def test_minute_path_order_is_metatraders_tick_generation():
    """MetaTrader 5 Help, "Generation of Ticks": a bull minute goes open, low, high, close; a bear one open,
    high, low, close; a doji the other way than the minute before it. The nearer extreme does not decide."""
    o = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    h = np.array([1.1, 1.5, 1.3, 1.3, 1.2, 1.3])
    lo = np.array([0.5, 0.9, 0.7, 0.7, 0.9, 0.7])
    c = np.array([1.05, 0.95, 1.0, 1.0, 1.1, 1.0])
    pts = ohlc_points(o, h, lo, c)
    np.testing.assert_array_equal(pts[0], [1.0, 0.5, 1.1, 1.05])  # bull, its high nearer: still low first
    np.testing.assert_array_equal(pts[1], [1.0, 1.5, 0.9, 0.95])  # bear, its low nearer: still high first
    np.testing.assert_array_equal(pts[2], [1.0, 0.7, 1.3, 1.0])  # doji after a bear minute: as a bull one
    np.testing.assert_array_equal(pts[3], [1.0, 0.7, 1.3, 1.0])  # doji after a doji: the last that moved
    np.testing.assert_array_equal(pts[4], [1.0, 0.9, 1.2, 1.1])  # bull
    np.testing.assert_array_equal(pts[5], [1.0, 1.3, 0.7, 1.0])  # doji after a bull minute: as a bear one
    first_doji = ohlc_points(*(np.array([v]) for v in (1.0, 1.2, 0.9, 1.0)))
    np.testing.assert_array_equal(first_doji[0], [1.0, 0.9, 1.2, 1.0])  # nothing before it: as a bull one


def test_a_stop_loss_the_minutes_nearer_extreme_hides_is_hit_first_on_a_bull_minute():
    """A bull minute whose high is nearer its open still goes to its low first: the SL below fills before the
    TP above (the old "nearer extreme first" order filled the TP)."""
    actions = {0: lambda b: b.order(+1, 1.0, 1.0970, 1.1010, 0, "")}
    bull = [(1.1000, 1.1012, 1.0968, 1.1005)]  # high 12 points away, low 32: low first all the same
    b, path = _pair([FLAT_HOUR, bull])
    b.attach_path(path)
    trade = _run(b, actions).iloc[0]
    assert (trade.exit_reason, trade.exit_price) == ("sl", 1.0970)


def _pair(minutes):
    """An H1 broker over hand-made M1 bars: ``minutes[k]`` = (open, high, low, close) rows of hour k."""
    rows, times = [], []
    for k, hour in enumerate(minutes):
        for j, row in enumerate(hour):
            rows.append(row)
            times.append(pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(hours=k, minutes=j))
    m1 = pd.DataFrame(rows, columns=["open", "high", "low", "close"], index=pd.DatetimeIndex(times))
    m1["spread"] = 0
    hours = [np.array(h) for h in minutes]
    h1 = np.array([[h[0, 0], h[:, 1].max(), h[:, 2].min(), h[-1, 3]] for h in hours])
    time = pd.date_range("2024-01-01", periods=len(h1), freq="h", tz="UTC")
    config = AccountConfig(deposit=100_000.0, missing_spread=0)
    b = Broker(h1[:, 0], h1[:, 1], h1[:, 2], h1[:, 3], np.zeros(len(h1)), time, POINT, config)
    return b, M1Path(time, m1, POINT, None)


def _run(b, actions):
    for t in range(len(b.opens)):
        b.bar_open(t)
        if t in actions:
            actions[t](b)
        b.bar_range(t)
    b.finish(len(b.opens) - 1)
    return b.trades_frame()


FLAT_HOUR = [(1.1000, 1.1000, 1.1000, 1.1000)]
UP_THEN_DOWN = [(1.1000, 1.1055, 1.0998, 1.1050), (1.1050, 1.1052, 1.0940, 1.0950)]  # TP 1.1050, SL 1.0960
DOWN_THEN_UP = [(1.1000, 1.1002, 1.0950, 1.0955), (1.0955, 1.1060, 1.0954, 1.1058)]


@pytest.mark.parametrize(
    ("hour", "reason", "price"), [(UP_THEN_DOWN, "tp", 1.1050), (DOWN_THEN_UP, "sl", 1.0960)]
)
def test_sl_and_tp_inside_one_bar_the_m1_path_decides(hour, reason, price):
    actions = {0: lambda b: b.order(+1, 1.0, 1.0960, 1.1050, 0, "")}
    b, path = _pair([FLAT_HOUR, hour])
    assert _run(b, actions).iloc[0].exit_reason == "sl"  # open prices only: the stop-loss is assumed first
    b, path = _pair([FLAT_HOUR, hour])
    b.attach_path(path)
    trade = _run(b, actions).iloc[0]
    assert (trade.exit_bar, trade.exit_reason, trade.exit_price) == (1, reason, price)


def test_a_buy_stop_inside_a_bar_is_stopped_only_by_prices_after_its_fill():
    # The dip to 1.0950 comes before the rise through the buy stop at 1.1020: the SL at 1.0990 is not hit.
    actions = {0: lambda b: b.pending("buy_stop", 1.0, 1.1020, None, 1.0990, None, None, 0, "")}
    b, path = _pair([FLAT_HOUR, DOWN_THEN_UP])
    b.attach_path(path)
    trade = _run(b, actions).iloc[0]
    assert (trade.entry_bar, trade.entry_price, trade.exit_reason) == (1, 1.1020, "end of test")
    b, _ = _pair([FLAT_HOUR, DOWN_THEN_UP])
    trade = _run(b, actions).iloc[0]  # open prices only: the pessimistic rule stops it in the fill bar
    assert (trade.exit_bar, trade.exit_reason) == (1, "sl")


def test_a_gap_between_minutes_fills_a_stop_at_the_minute_open():
    hour = [(1.1000, 1.1005, 1.0995, 1.1000), (1.0970, 1.0975, 1.0960, 1.0965)]
    b, path = _pair([FLAT_HOUR, hour])
    b.attach_path(path)
    trade = _run(b, {0: lambda b: b.order(+1, 1.0, 1.0990, None, 0, "")}).iloc[0]
    assert (trade.exit_reason, trade.exit_price) == ("sl", 1.0970)


def test_a_pending_order_expires_at_its_minute():
    # The buy limit at 1.0960 expires at 01:01; the dip reaching it comes in the minute of 01:01.
    hour = [(1.1000, 1.1000, 1.0990, 1.0995), (1.0995, 1.0996, 1.0950, 1.0960)]
    b, path = _pair([FLAT_HOUR, hour])
    b.attach_path(path)
    expiry = pd.Timestamp("2024-01-01 01:01", tz="UTC")
    trades = _run(b, {0: lambda b: b.pending("buy_limit", 1.0, 1.0960, None, None, None, expiry, 0, "")})
    assert not len(trades) and b.orders_frame().iloc[0].state == "expired"


def _m1_and_h1(days=10, seed=3):
    m1 = synthetic_candles("EURUSD", "M1", bars=days * 1440, seed=seed, start="2024-01-01")
    return m1, resample(m1, "H1")


def test_a_backtest_in_ohlc1m_from_synthetic_and_csv_m1_data(tmp_path):
    m1, h1 = _m1_and_h1()
    params = {"sl_points": 150, "tp_points": 300}
    base = Backtest(h1, SmaCrossEA, forward=None).run(**params)
    fine = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=m1).run(**params)
    assert fine.data["model_name"] == "1 minute OHLC" and fine.data["history_quality"] == 100.0
    assert base.data["model"] == "open" and base.data["history_quality"] is None
    # Same decisions and entries at the hourly opens; exits may differ where the minutes tell.
    assert len(fine.trades) > 10
    assert set(fine.trades.exit_reason) <= {"sl", "tp", "signal", "end of test"}
    again = read_mt5_csv(write_mt5_csv(m1, tmp_path / "EURUSD_M1.csv"))
    from_csv = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=again).run(**params)
    pd.testing.assert_frame_equal(from_csv.trades, fine.trades)


def test_history_quality_counts_the_bars_with_m1_data():
    m1, h1 = _m1_and_h1(days=2)
    hours = m1.index.floor("h")
    gap = m1[(hours < h1.index[10]) | (hours >= h1.index[22])]  # 12 of 48 hours without M1
    result = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=gap).run()
    tested = h1.index[h1.index >= pd.Timestamp(result.data["forward_first"])]
    covered = tested.isin(gap.index.floor("h"))
    assert 0 < covered.mean() < 1
    assert result.data["history_quality"] == pytest.approx(100 * covered.mean(), abs=0.01)


class _Hold(ExpertAdvisor):
    def on_bar(self):
        if not self.positions() and not self.orders():
            bid, pt = self.bid, self.point
            self.buy_limit(0.1, bid - 30 * pt, sl=bid - 200 * pt, tp=bid + 100 * pt)


def test_bad_model_requests_are_refused_in_one_line():
    m1, h1 = _m1_and_h1(days=1)
    with pytest.raises(ValueError, match="unknown model 'tick'"):
        Backtest(h1, _Hold, model="tick")
    with pytest.raises(ValueError, match="needs ticks"):
        Backtest(h1, _Hold, model="ticks")
    with pytest.raises(ValueError, match="only used by model 'ticks'"):
        Backtest(h1, _Hold, model="ohlc1m", m1=m1, ticks=m1)
    with pytest.raises(ValueError, match="needs M1 candles"):
        Backtest(h1, _Hold, model="ohlc1m")
    with pytest.raises(ValueError, match="columns open, high, low, close, spread"):
        Backtest(h1, _Hold, forward=None, model="ohlc1m", m1=m1.drop(columns="spread")).run()
    bad = m1.copy()
    bad.iloc[5, 0] = np.nan
    with pytest.raises(ValueError, match="M1 bar 5"):
        Backtest(h1, _Hold, forward=None, model="ohlc1m", m1=bad).run()


def test_pending_orders_through_the_minutes_balance_with_the_deals():
    m1, h1 = _m1_and_h1(days=5)
    result = Backtest(h1, _Hold, forward=None, model="ohlc1m", m1=m1).run()
    assert len(result.trades) > 10 and not result.rejected
    assert result.deals.balance.iloc[-1] == pytest.approx(result.balance[-1])


def _reference(points, minute_open, entry_at, stop=None, sl=None, tp=None):
    """A straight walk along every price of the path (spread 0), one long position: the first event wins.

    ``points``: the path's prices; ``minute_open[i]``: point i opens a minute (the move to it is a jump).
    ``entry_at``: the first point index where trading starts (a market buy there, or the buy stop waits).
    Returns (entry price, exit reason, exit price) or None when nothing happened.
    """
    entry = None if stop is not None else points[entry_at]
    for i in range(entry_at + 1, len(points)):
        a, b, jump = points[i - 1], points[i], minute_open[i]
        if entry is None:
            if b >= stop and (jump or a < stop):
                entry = b if jump else stop
                a = entry
            else:
                continue
        if jump:
            if b <= sl:
                return entry, "sl", b
            if b >= tp:
                return entry, "tp", b
        elif b < a and b <= sl:
            return entry, "sl", sl
        elif b > a and b >= tp:
            return entry, "tp", tp
    return (entry, "end of test", None) if entry is not None else None


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("entry", ["market", "buy_stop"])
def test_the_m1_walk_matches_a_straight_walk_along_every_price(seed, entry):
    rng = np.random.default_rng(seed)
    hours = []
    price = 1.1
    for _ in range(4):
        rows = []
        for _ in range(60):
            o = round(price + rng.choice([0, 0, 0, 3e-5, -3e-5]), 5)  # sometimes a gap between minutes
            c = round(o + rng.normal(0, 2e-4), 5)
            h = round(max(o, c) + abs(rng.normal(0, 1e-4)), 5)
            lo = round(min(o, c) - abs(rng.normal(0, 1e-4)), 5)
            rows.append((o, h, lo, c))
            price = c
        hours.append(rows)
    b, path = _pair(hours)
    b.attach_path(path)
    first = b.opens[1]
    sl, tp = round(first - 0.0012, 5), round(first + 0.0012, 5)
    stop = round(first + 0.0004, 5)
    if entry == "market":
        trades = _run(b, {1: lambda b: b.order(+1, 1.0, sl, tp, 0, "")})
    else:
        trades = _run(b, {1: lambda b: b.pending("buy_stop", 1.0, stop, None, sl, tp, None, 0, "")})
    pts = path.points.reshape(-1) / 100_000  # the path keeps whole points
    opens = np.zeros(len(pts), bool)
    opens[::4] = True
    want = _reference(pts, opens, 60 * 4, stop if entry == "buy_stop" else None, sl, tp)
    if want is None:
        assert not len(trades)
        return
    got = trades.iloc[0]
    assert got.entry_price == pytest.approx(want[0], abs=1e-12) and got.exit_reason == want[1]
    if want[2] is not None:
        assert got.exit_price == pytest.approx(want[2], abs=1e-12)


def test_without_stops_or_orders_the_minutes_change_only_the_spread_of_the_moment():
    m1, h1 = _m1_and_h1(days=6)
    fixed = AccountConfig(spread=12)
    base = Backtest(h1, SmaCrossEA, forward=None, account=fixed).run()
    fine = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=m1, account=fixed).run()
    pd.testing.assert_frame_equal(base.trades, fine.trades)
    np.testing.assert_array_equal(base.equity["equity"], fine.equity["equity"])
    # With the data's spreads, a buy at an hour's open pays its first minute's spread, not the hour's lowest.
    own = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=m1).run().trades
    buys = own[own["type"] == "buy"]
    first = m1["spread"].groupby(m1.index.floor("h")).first()
    opened = h1.index[buys["entry_bar"].to_numpy()]
    expected = h1["open"].to_numpy()[buys["entry_bar"].to_numpy()] + first.loc[opened].to_numpy() * 1e-5
    np.testing.assert_allclose(buys["entry_price"].to_numpy(), expected, atol=1e-12)
    assert (first.loc[opened].to_numpy() > h1["spread"].loc[opened].to_numpy()).any()


def test_a_decision_in_ohlc1m_takes_its_first_minutes_spread_not_the_hours_lowest():
    """An H1 bar's spread is the lowest of its minutes' (MetaTrader builds it from them): at the hour's open
    that is the future. The EA's ask and its market fill at the open are the first minute's own spread (20
    points here, where the hour's lowest is 5); a short is valued and closed at the end with the last
    minute's spread (7), not the hour's lowest."""
    rows, spreads = [], []
    for _ in range(3):
        for minute in range(60):
            rows.append((1.1000, 1.1000, 1.1000, 1.1000))
            spreads.append(20 if minute == 0 else 7 if minute == 59 else 5)
    times = pd.date_range("2024-01-01", periods=len(rows), freq="min", tz="UTC")
    m1 = make_frame(
        {**dict(zip(("open", "high", "low", "close"), np.array(rows).T, strict=True)), "spread": spreads},
        times,
        CandleMeta("EURUSD", Timeframe.M1, 5),
    )
    h1 = resample(m1, "H1")
    assert list(h1["spread"]) == [5, 5, 5]

    class BuyAndSell(ExpertAdvisor):
        asks: list = []  # noqa: RUF012 - read by the test

        def on_bar(self):
            type(self).asks.append(self.ask)
            if len(self.bars) == 1:
                self.buy(1.0)
            elif len(self.bars) == 2:
                self.sell(2.0)  # closes the long at the bid, opens a short at the bid

    result = Backtest(h1, BuyAndSell, model="ohlc1m", m1=m1, forward=None, account=AccountConfig()).run()
    assert BuyAndSell.asks[-2:] == [pytest.approx(1.1002), pytest.approx(1.1002)]
    trades = result.trades
    assert trades["entry_price"].iloc[0] == pytest.approx(1.1002)  # the long: bought at open + 20 points
    short = trades.iloc[-1]
    assert short.exit_reason == "end of test" and short.exit_price == pytest.approx(1.10007)  # + 7 points
    assert result.data["spread"].startswith("each minute's own spread")
    opened = Backtest(h1, BuyAndSell, forward=None).run()
    assert opened.trades["entry_price"].iloc[0] == pytest.approx(1.10005)  # open prices: the bar's own
    assert "the lowest MetaTrader saw during the bar" in opened.data["spread"]
