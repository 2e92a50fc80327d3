"""Figures named after backtesting.py's equal backtesting.py's own ``compute_stats`` on the same equity and
trades; the annualisation on trading days counts FX weeks as five days."""

import warnings

import numpy as np
import pandas as pd
import pytest
from backtesting._stats import compute_stats

from backtests import AccountConfig, Backtest, peers
from backtests.peers import backtesting_stats, day_closes, trading_day_stats, trading_days
from datafeeds import read_sample
from strategies import SmaCrossEA

# our stats key -> backtesting.py's name
NAMES = {
    "exposure_time_pct": "Exposure Time [%]",
    "equity_final": "Equity Final [$]",
    "equity_peak": "Equity Peak [$]",
    "return_pct": "Return [%]",
    "buy_and_hold_return_pct": "Buy & Hold Return [%]",
    "return_ann_pct": "Return (Ann.) [%]",
    "volatility_ann_pct": "Volatility (Ann.) [%]",
    "cagr_pct": "CAGR [%]",
    "sharpe_ratio_ann": "Sharpe Ratio",
    "sortino_ratio": "Sortino Ratio",
    "calmar_ratio": "Calmar Ratio",
    "alpha_pct": "Alpha [%]",
    "beta": "Beta",
    "max_drawdown_pct": "Max. Drawdown [%]",
    "avg_drawdown_pct": "Avg. Drawdown [%]",
    "win_rate_pct": "Win Rate [%]",
    "best_trade_pct": "Best Trade [%]",
    "worst_trade_pct": "Worst Trade [%]",
    "avg_trade_pct": "Avg. Trade [%]",
    "profit_factor_returns": "Profit Factor",
    "expectancy_pct": "Expectancy [%]",
    "sqn": "SQN",
    "kelly_criterion": "Kelly Criterion",
}
DURATIONS = {
    "duration": "Duration",
    "max_drawdown_duration": "Max. Drawdown Duration",
    "avg_drawdown_duration": "Avg. Drawdown Duration",
    "max_trade_duration": "Max. Trade Duration",
    "avg_trade_duration": "Avg. Trade Duration",
}

CACHES = (peers._period_of, peers._periods_per_year_of, peers._bin_ends, peers._trading_days_of,
          peers._day_ends)  # fmt: skip


def peer_stats(curves: pd.DataFrame, trades: pd.DataFrame, contract_size: float) -> pd.Series:
    """backtesting.py's compute_stats on the report's curve and trades, in its own trade-table format."""
    index = pd.DatetimeIndex(curves.index)
    entry_time, exit_time = pd.DatetimeIndex(trades["entry_time"]), pd.DatetimeIndex(trades["exit_time"])
    peer_trades = pd.DataFrame(
        {
            "EntryBar": index.searchsorted(entry_time),
            "ExitBar": index.searchsorted(exit_time),
            "PnL": trades["net_profit"].to_numpy(float),
            "ReturnPct": trades["net_profit"].to_numpy(float)
            / (trades["lots"].to_numpy(float) * contract_size * trades["entry_price"].to_numpy(float)),
            "EntryTime": entry_time,
            "ExitTime": exit_time,
        }
    )
    peer_trades["Duration"] = peer_trades["ExitTime"] - peer_trades["EntryTime"]
    ohlc = pd.DataFrame({"Close": curves["close"].to_numpy(float)}, index=index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compute_stats(peer_trades, curves["equity"].to_numpy(float), ohlc, None)


def assert_same_as_peer(stats: dict, theirs: pd.Series) -> None:
    for key, name in NAMES.items():
        want = theirs[name]
        if want is None or not np.isfinite(want):
            assert stats[key] is None, key
        else:
            assert stats[key] == pytest.approx(want, rel=1e-6, abs=1e-4), key
    for key, name in DURATIONS.items():
        want = theirs[name]
        assert (None if pd.isna(want) else pd.Timedelta(want)) == (
            None if stats[key] is None else pd.Timedelta(stats[key])
        ), key
    assert stats["start"] == str(theirs["Start"]) and stats["end"] == str(theirs["End"])
    assert stats["total_trades"] == theirs["# Trades"]


@pytest.mark.parametrize(
    ("params", "account"),
    [
        ({}, AccountConfig()),
        ({"sl_points": 150, "tp_points": 300, "lots": 0.5}, AccountConfig(commission=3.5, swap_long=-2)),
    ],
    ids=["signals", "stops-costs"],
)
def test_backtesting_py_named_figures_equal_compute_stats(params, account):
    result = Backtest(read_sample(), SmaCrossEA, account=account).run(**params)
    assert len(result.trades) > 50
    theirs = peer_stats(result.curves, result.trades, account.contract_size)
    assert_same_as_peer(result.stats, theirs)


def test_no_trades_gives_the_peer_figures_or_none():
    from strategies import ExpertAdvisor

    class Idle(ExpertAdvisor):
        pass

    result = Backtest(read_sample().iloc[:600], Idle).run()
    theirs = peer_stats(result.curves, result.trades, 100_000.0)
    assert_same_as_peer(result.stats, theirs)
    assert result.stats["return_pct"] == 0.0 and result.stats["sharpe_ratio_ann"] is None


def test_sunday_evening_bars_belong_to_monday():
    idx = pd.DatetimeIndex(["2024-01-05 22:00", "2024-01-07 22:00", "2024-01-08 01:00"], tz="UTC")
    days = trading_days(idx, weekends=False)
    assert list(days.strftime("%a %d")) == ["Fri 05", "Mon 08", "Mon 08"]
    assert list(trading_days(idx, weekends=True).strftime("%a")) == ["Fri", "Sun", "Mon"]


def test_trading_days_per_year_on_fx_hours():
    # Sunday 22:00 .. Friday 21:00, 52 weeks of hourly bars: 5 trading days a week, not 6 calendar days.
    hours = pd.date_range("2023-01-01 22:00", "2023-12-29 21:00", freq="h", tz="UTC")
    fx = hours[(hours.day_of_week < 5) | ((hours.day_of_week == 6) & (hours.hour >= 22))]
    fx = fx[~((fx.day_of_week == 4) & (fx.hour >= 22))]
    equity = 10_000 * np.exp(np.cumsum(np.random.default_rng(1).normal(0, 1e-3, len(fx))))
    curves = pd.DataFrame({"equity": equity, "close": 1.0}, index=fx)
    out = trading_day_stats(curves)
    assert out["trading_days_per_year"] == pytest.approx(365.25 * 5 / 7, abs=0.01)
    calendar_days = pd.Series(equity, index=fx).resample("D").last().dropna()
    assert len(calendar_days) > 300  # what backtesting.py's daily resample counts


def test_figures_of_the_bar_times_are_kept_per_index_and_never_lent_to_another():
    """The calendar of an index (its trading days, periods per year, daily bins) is computed once and kept;
    another index of the same length and ends (a bar moved), or the same instants in another time zone
    (whose days begin at other instants), gets its own; a curve with NaN equity takes pandas' own path."""
    base = pd.date_range("2024-01-01", periods=300, freq="h", tz="UTC")
    moved = base[:150].append(pd.DatetimeIndex([base[150] + pd.Timedelta(minutes=30)])).append(base[151:])
    tokyo = base.tz_convert("Asia/Tokyo")
    rng = np.random.default_rng(4)
    curves = [
        pd.DataFrame({"equity": 1e4 + rng.normal(0, 50, 300).cumsum(), "close": 1.0}, index=index)
        for index in (base, moved, tokyo, base)
    ]
    curves[3].iloc[[7, 40, 41], 0] = np.nan  # equity NaN in the middle of days
    trades = pd.DataFrame(columns=["net_profit", "entry_time", "exit_time", "lots", "entry_price"])
    cached = [(backtesting_stats(c, trades, 1e5), trading_day_stats(c), list(trading_days(c.index, False)))
              for c in curves]  # fmt: skip
    for cache in CACHES:
        cache.cache_clear()
    for c, figures in zip(curves, cached, strict=True):
        fresh = (backtesting_stats(c, trades, 1e5), trading_day_stats(c), list(trading_days(c.index, False)))
        assert repr(fresh) == repr(figures)
        for cache in CACHES:
            cache.cache_clear()
    assert cached[0][2] != cached[2][2]  # Tokyo's days are not UTC's


def test_report_json_alone_gives_backtesting_py_the_same_figures(tmp_path):
    import json

    from backtests.report import write_report

    result = Backtest(read_sample().iloc[:2500], SmaCrossEA, account=AccountConfig(commission=2.0)).run()
    write_report(result, tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    curves = pd.DataFrame(doc["curves"]).set_index("time")
    curves.index = pd.DatetimeIndex(curves.index)
    trades = pd.DataFrame(doc["trades"])
    assert_same_as_peer(doc["stats"], peer_stats(curves, trades, doc["account"]["contract_size"]))


def test_exposure_counts_the_bar_an_intrabar_fill_falls_in():
    """A fill at 01:23 (a stop inside the 01:00 bar) held to the 04:00 open is in the market in bars 01:00,
    02:00, 03:00 and 04:00: 4 of the 10 rows. Mapping 01:23 to the next bar's row counted 3."""
    from backtests.peers import backtesting_stats

    index = pd.date_range("2024-01-01", periods=10, freq="h", tz="UTC")
    curves = pd.DataFrame({"equity": np.full(10, 10_000.0), "close": np.full(10, 1.1)}, index=index)
    trades = pd.DataFrame(
        {
            "entry_time": [index[1] + pd.Timedelta(minutes=23)],
            "exit_time": [index[4]],
            "lots": [1.0],
            "entry_price": [1.1],
            "net_profit": [0.0],
        }
    )
    assert backtesting_stats(curves, trades, 100_000.0)["exposure_time_pct"] == 40.0


def test_day_closes_are_the_last_equity_of_each_trading_day():
    """The start's equity, then each trading day's last (found once per index, by position), as pandas'
    group-by gives them: FX hours with Sunday-evening bars (counted to Monday), a week of hours in Tokyo's
    zone, crypto bars trading at weekends, and equity with gaps (NaN) whose days keep their last value."""
    fx = pd.date_range("2024-01-05 20:00", periods=120, freq="h", tz="UTC")  # Friday evening .. Wednesday
    fx = fx[(fx.day_of_week < 5) | ((fx.day_of_week == 6) & (fx.hour >= 21))]
    crypto = pd.date_range("2024-01-01", periods=24 * 9, freq="h", tz="UTC")
    tokyo = pd.date_range("2024-01-01", periods=24 * 9, freq="h", tz="UTC").tz_convert("Asia/Tokyo")
    rng = np.random.default_rng(7)
    for index in (fx, crypto, tokyo):
        for gaps in (False, True):
            equity = 1e4 + rng.normal(0, 10, len(index)).cumsum()
            if gaps:
                equity[[3, 30, 31]] = np.nan
            weekends = peers._periods_per_year(index[1:])[1]
            days = trading_days(index[1:], weekends).asi8
            expected = pd.Series(equity[1:]).groupby(days).last().to_numpy()
            got = day_closes(index, equity)
            assert got[0] == equity[0]
            np.testing.assert_array_equal(got[1:], expected)


@pytest.mark.parametrize(
    "returns",
    [
        [0.01, -0.02, np.nan, 0.003, -0.0, 0.0],
        [0.5, -1.0, 0.2],  # a -100 % period: backtesting.py's 0
        [1e-9, -1e-9, 1e300],
        [np.inf, 0.1],
        [],
        list(np.random.default_rng(3).normal(0, 0.01, 997)),
    ],
)
def test_the_geometric_mean_and_downside_on_arrays_are_pandas_bit_for_bit(returns):
    """The annualised figures read the day returns as an array; backtesting.py's own expressions on the
    Series give the same bits (its ``fillna(0)``, ``Series.sum``, ``clip(-inf, 0)`` and ``np.mean``)."""
    series = pd.Series(returns, dtype=float)
    r = series.fillna(0) + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        pandas_mean = 0.0 if np.any(r <= 0) else float(np.exp(np.log(r).sum() / (len(r) or np.nan)) - 1)
    got = peers._geometric_mean(series.to_numpy())
    assert got == pandas_mean or (np.isnan(got) and np.isnan(pandas_mean))
    assert peers._geometric_mean(series) == got or np.isnan(got)
    clean = series.dropna()
    if len(clean):
        expected = float(np.sqrt(np.mean(clean.clip(-np.inf, 0) ** 2)))
        assert float(np.sqrt(np.mean(np.minimum(clean.to_numpy(), 0.0) ** 2))) == expected


def test_the_bars_held_by_all_trades_at_once_are_those_marked_trade_by_trade():
    """Each trade holds the bars ``entry..exit`` (an entry before the first bar, -1, slices from the last bar
    as the per-trade ``held[a : b + 1] = 1`` did); counted for all trades at once, overlaps, single-bar
    trades, one at the last bar and an exit before the entry included, the same bars are held."""
    rng = np.random.default_rng(3)
    n = 300
    entry = rng.integers(-1, n, size=500)
    exit_ = np.clip(entry + rng.integers(-3, 12, size=500), -1, n - 1)
    expected = np.zeros(n, dtype=np.int64)
    for a, b in zip(entry, exit_, strict=True):
        expected[a : b + 1] = 1
    assert peers._held(n, entry, exit_).tolist() == expected.tolist()
    assert peers._held(n, np.array([-1]), np.array([n - 1])).tolist() == [0] * (n - 1) + [1]
    assert peers._held(n, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).sum() == 0
