"""Equity drawdowns on every price the modelling mode models, hand-computed (1 lot of EURUSD: 1.00 USD a
point; spread 0): a peak inside a bar counts, and a position counts only from the price it was filled at."""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest, equity_path, path_events, scoring
from backtests.broker import Broker
from backtests.equity_path import path_drawdowns
from backtests.paths import M1Path
from backtests.replay import broker_figures
from datafeeds import bars_from_ticks, read_sample, resample, synthetic_candles, synthetic_ticks
from datafeeds.candles import CandleMeta, make_frame
from datafeeds.timeframes import Timeframe
from strategies import ExpertAdvisor, SmaCrossEA

POINT = 1e-5
T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _broker(rows):
    a = np.array(rows, dtype=float)
    time = pd.date_range(T0, periods=len(a), freq="h")
    config = AccountConfig(deposit=10_000.0, missing_spread=0)
    return Broker(*a.T, np.zeros(len(a)), time, POINT, config)


def _run(b, actions):
    for t in range(len(b.opens)):
        b.bar_open(t)
        if t in actions:
            actions[t](b)
        b.bar_range(t)
    b.finish(len(b.opens) - 1)
    return path_drawdowns(b, 0, len(b.opens) - 1, 10_000.0, b.time[0]).drawdowns


def test_a_peak_at_a_bars_high_counts_before_the_next_bars_low():
    """Bar 1 (bull: open, low, high, close) takes equity 10,000 -> 9,500 -> 11,000 -> 10,500; bar 2 (bear:
    open, high, low, close) 10,500 -> 10,600 -> 9,800 -> 10,000. The largest fall is 11,000 -> 9,800 =
    1,200 (10.909 %); peaks at closes only saw 10,500 -> 9,800 = 700."""
    rows = [(1.1,) * 4, (1.1000, 1.1100, 1.0950, 1.1050), (1.1050, 1.1060, 1.0980, 1.1000)]
    b = _broker(rows)
    dd = _run(b, {0: lambda b: b.order(+1, 1.0, None, None, 0, "")})
    assert dd == {
        "absolute": pytest.approx(500.0),
        "maximal": pytest.approx(1_200.0),
        "maximal_pct": pytest.approx(1_200 / 11_000 * 100),
        "relative_pct": pytest.approx(1_200 / 11_000 * 100),
        "relative": pytest.approx(1_200.0),
    }
    figures = broker_figures(b, 0, 2, b.config)
    assert figures.stats["equity_drawdown_maximal"] == pytest.approx(1_200.0)  # the report's figure
    # its skeleton: the deposit and its low, then the record peak 11,000 and the low after it
    assert list(figures.equity_path["equity"]) == [10_000.0, 9_500.0, 11_000.0, 9_800.0]


def test_a_position_counts_from_the_price_it_was_filled_at():
    """A buy stop at 1.1050 in a bull bar (open 1.1000, low 1.0900, high 1.1100, close 1.1050) fills on the
    way from the low to the high: equity is 10,000 at the open and the low, 10,500 at the high and 10,000 at
    the close, a fall of 500 (4.76 %) and never below the deposit. Counting the position over the whole bar
    made its low a 1,500 loss."""
    rows = [(1.1,) * 4, (1.1000, 1.1100, 1.0900, 1.1050)]
    b = _broker(rows)
    dd = _run(b, {1: lambda b: b.pending("buy_stop", 1.0, 1.1050, None, None, None, None, 0, "")})
    assert dd["maximal"] == pytest.approx(500.0) and dd["absolute"] == 0.0
    assert dd["maximal_pct"] == pytest.approx(500 / 10_500 * 100, abs=1e-6)


def test_minutes_are_the_prices_of_1_minute_ohlc():
    """Two minutes of bar 1: a bull one up to 1.1080, then a bear one down to 1.0990: equity 10,800 then
    9,900, a fall of 900 inside a bar whose close (10,000) and low (9,900) alone showed 100."""
    minutes = [
        (1.1000, 1.1000, 1.1000, 1.1000),
        (1.1000, 1.1080, 1.1000, 1.1070),
        (1.1070, 1.1070, 1.0990, 1.1000),
    ]
    times = [T0, T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=1, minutes=1)]
    m1 = pd.DataFrame(minutes, columns=["open", "high", "low", "close"], index=pd.DatetimeIndex(times))
    m1["spread"] = 0
    b = _broker([(1.1,) * 4, (1.1000, 1.1080, 1.0990, 1.1000)])
    b.attach_path(M1Path(b.time, m1, POINT, None))
    dd = _run(b, {0: lambda b: b.order(+1, 1.0, None, None, 0, "")})
    assert dd["maximal"] == pytest.approx(900.0) and dd["absolute"] == pytest.approx(100.0)


def test_a_backtest_reports_the_drawdown_of_its_modelled_prices():
    """The same first case through Backtest: the report's equity drawdown is the 1,200."""
    rows = [(1.1,) * 4, (1.1,) * 4, (1.1000, 1.1100, 1.0950, 1.1050), (1.1050, 1.1060, 1.0980, 1.1000)]
    frame = make_frame(
        dict(zip(("open", "high", "low", "close"), np.array(rows).T, strict=True)),
        pd.date_range(T0, periods=4, freq="h"),
        CandleMeta("EURUSD", Timeframe.H1, 5),
    )

    class BuyOnce(ExpertAdvisor):
        def on_bar(self):
            if len(self.bars) == 1:
                self.buy(1.0)

    result = Backtest(frame, BuyOnce, forward=None, account=AccountConfig(missing_spread=0)).run()
    assert result.stats["equity_drawdown_maximal"] == pytest.approx(1_200.0)
    assert result.stats["equity_drawdown_absolute"] == pytest.approx(500.0)


def _path_of(bt, monkeypatch, **params):
    """Run ``bt`` and keep what its equity path was built from (the broker, the bars, the deposit)."""
    seen = {}

    def keep(*args):
        seen["args"] = args
        return path_drawdowns(*args)

    monkeypatch.setattr(scoring, "path_drawdowns", keep)
    bt.run(**params)
    monkeypatch.undo()
    return seen["args"]


def _mixed_runs(monkeypatch):
    """Runs whose paths mix bars with finer prices and bars without (gaps in the minutes, in the ticks)."""
    m1 = synthetic_candles("EURUSD", "M1", 60 * 24 * 20, seed=3, start="2020-01-01")
    keep = np.ones(len(m1), dtype=bool)
    for s in np.random.default_rng(0).integers(0, len(m1) - 600, 20):
        keep[s : s + 400] = False  # whole bars and parts of bars without minutes
    h1 = resample(m1, "H1")
    minutes = Backtest(h1, SmaCrossEA, forward=None, model="ohlc1m", m1=m1[keep])
    ticks = synthetic_ticks(
        synthetic_candles("EURUSD", "M1", 60 * 24 * 8, seed=5, start="2023-01-02"), seed=5
    )
    hours = resample(bars_from_ticks(ticks, "M1"), "H1")
    some = ticks[ticks.index.hour % 5 != 2]
    return [
        _path_of(Backtest(read_sample(), SmaCrossEA), monkeypatch),
        _path_of(Backtest(read_sample(), SmaCrossEA, account=AccountConfig(hedging=True)), monkeypatch),
        _path_of(minutes, monkeypatch, sl_points=300, tp_points=600),
        _path_of(minutes, monkeypatch, fast=5, slow=12),
        _path_of(
            Backtest(hours, SmaCrossEA, forward=None, model="ticks", ticks=some), monkeypatch, fast=3, slow=7
        ),
    ]


def test_the_path_does_not_depend_on_how_it_is_cut_into_chunks(monkeypatch):
    """The equity path is built a chunk of prices at a time, each chunk's stretches between events repeated
    from the events' places: chunks of a few prices (events and records on their edges), of one bar, and
    of every price at once, with the lows found either way and the stretches with nothing open cut to their
    first price or not, give the same skeleton and figures."""
    for args in _mixed_runs(monkeypatch):
        default = path_drawdowns(*args)
        assert len(default.skeleton) > 2
        cuts = ((1 << 30, 0, 0.0), (1 << 30, 1 << 30, 2.0), (37, 64, 0.0), (5, 0, 2.0), (1000, 1 << 30, 0.5))
        for chunk, few, sparse in cuts:
            monkeypatch.setattr(equity_path, "_CHUNK", chunk)
            monkeypatch.setattr(equity_path, "_FEW", few)
            monkeypatch.setattr(equity_path, "_SPARSE", sparse)
            cut = path_drawdowns(*args)
            assert cut.drawdowns == default.drawdowns
            pd.testing.assert_frame_equal(cut.skeleton, default.skeleton)
        monkeypatch.undo()


def test_the_skeletons_drawdowns_are_those_of_the_whole_curve(monkeypatch):
    """The figures kept from the skeleton equal the ones measured on every price of the curve: the largest
    fall from the running peak (the deposit first), its percent, the largest percent and the lowest value."""
    add = equity_path.Skeleton.add
    for args in _mixed_runs(monkeypatch):
        pieces = []

        def spy(self, curve, bar_of, pieces=pieces):
            pieces.append(curve.copy())
            return add(self, curve, bar_of)

        monkeypatch.setattr(equity_path.Skeleton, "add", spy)
        dd = path_drawdowns(*args).drawdowns
        monkeypatch.undo()
        deposit = args[3]
        curve = np.concatenate(pieces)
        peak = np.maximum.accumulate(np.concatenate(([deposit], curve)))[1:]
        fall, pct = peak - curve, (peak - curve) / peak * 100
        assert dd["maximal"] == pytest.approx(fall.max(), abs=1e-6)
        assert dd["maximal_pct"] == pytest.approx(pct[np.argmax(fall)], abs=1e-6)
        assert dd["relative_pct"] == pytest.approx(pct.max(), abs=1e-6)
        assert dd["absolute"] == pytest.approx(max(0.0, deposit - curve.min()), abs=1e-6)


def test_the_legs_of_many_deals_at_once_are_those_found_one_by_one():
    """A deal on a bar of its own four prices counts from the first price that reaches it (equal, or the
    end of a stretch crossing it); found for all deals at once, ties and flat stretches included, it is
    the same rank as the one-deal rule's."""
    rng = np.random.default_rng(7)
    points = rng.integers(0, 5, size=(4000, 4)).astype(float)  # a small grid: many ties and flat stretches
    price = rng.integers(-1, 6, size=4000).astype(float)
    expected = [path_events._leg(row, p) for row, p in zip(points, price, strict=True)]
    assert path_events._legs(points, price).tolist() == expected


def test_the_events_of_a_short_trade_and_its_profit_are_hand_computed():
    """A sell of 1 lot at bar 0's open (1.10000, spread 0) adds 1 lot and 110,000 lot-points to the short
    side where it was filled; the buy that closes it at bar 1's open (1.09500) takes the trade's own
    1 lot x 110,000 back at that bar's open, and its profit (+500.00) reaches the balance there."""
    rows = [(1.1,) * 4, (1.0950, 1.0960, 1.0940, 1.0950), (1.0950,) * 4]
    b = _broker(rows)
    _run(
        b,
        {0: lambda b: b.order(-1, 1.0, None, None, 0, ""), 1: lambda b: b.order(+1, 1.0, None, None, 0, "")},
    )
    keys, moves = path_events.deal_events(b.ledger, {b.symbol: path_events.BarPrices(b)})
    assert keys.tolist() == [0, 1 << path_events.KEY_SHIFT, 1 << path_events.KEY_SHIFT]
    assert moves.tolist() == [
        [0.0, 0.0, 0.0, 1.0, 110_000.0],
        [0.0, 0.0, 0.0, -1.0, pytest.approx(-110_000.0)],  # the entry price x points per unit, unrounded
        [pytest.approx(500.0), 0.0, 0.0, 0.0, 0.0],
    ]


def test_deals_that_are_not_positions_leave_the_bar_level_estimate():
    """A deal that is neither an entry nor an exit (a live account's netting reversal, "inout") or an exit
    without its trade cannot be replayed as positions: the builder says so (None) instead of placing a
    volume it does not know."""
    rows = [(1.1,) * 4, (1.0950,) * 4, (1.0950,) * 4]
    b = _broker(rows)
    _run(
        b,
        {0: lambda b: b.order(+1, 1.0, None, None, 0, ""), 1: lambda b: b.order(-1, 1.0, None, None, 0, "")},
    )
    prices = {b.symbol: path_events.BarPrices(b)}
    assert path_events.deal_events(b.ledger, prices) is not None
    b.ledger.deals[1].entry = "inout"
    assert path_events.deal_events(b.ledger, prices) is None
    b.ledger.deals[1].entry = "out"
    b.ledger.trades.clear()
    assert path_events.deal_events(b.ledger, prices) is None
