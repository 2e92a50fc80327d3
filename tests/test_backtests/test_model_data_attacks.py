"""The modelling modes' data as a careless or hostile user gives it: one test per class of bad input.

Ticks of another symbol or price scale, files in another clock than the candles, an empty tick file, a
crossed quote, and the legal oddities (partial coverage, millions of ticks at one time stamp)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from backtests.paths import ModelDataError
from datafeeds import (
    BrokerClock,
    bars_from_ticks,
    make_ticks,
    resample,
    synthetic_candles,
    synthetic_ticks,
    write_mt5_csv,
)
from datafeeds.tick_csv import HEADER, write_tick_csv
from datafeeds.ticks import TickMeta
from strategies import ExpertAdvisor, SmaCrossEA

SMA = {"fast": 3, "slow": 8, "sl_points": 60}


@pytest.fixture(scope="module")
def market():
    m1 = synthetic_candles("EURUSD", "M1", bars=2 * 1440, seed=7, start="2024-03-07")
    ticks = synthetic_ticks(m1, seed=7, ticks_per_minute=5)
    return resample(bars_from_ticks(ticks, "M1"), "H1"), m1, ticks


def in_clock(df: pd.DataFrame, clock: BrokerClock) -> pd.DataFrame:
    """The same bars, to be written in ``clock`` (a file's times are its frame's broker clock)."""
    out = df.copy()
    out.attrs = {"candles": replace(df.attrs["candles"], clock=clock)}
    return out


def cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neuronet", "backtest", "SmaCrossEA", "-p", "fast=3", "-p", "slow=8",
         "-p", "sl_points=60", "--forward", "none", "--no-progress", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_ticks_or_minutes_of_another_symbol_are_refused_by_name(market):
    h1, m1, ticks = market
    other = ticks.copy()
    other.attrs = {"ticks": replace(ticks.attrs["ticks"], symbol="GBPUSD")}
    with pytest.raises(ModelDataError, match="the ticks are of GBPUSD, the candles of EURUSD"):
        Backtest(h1, SmaCrossEA, model="ticks", ticks=other)
    minutes = m1.copy()
    minutes.attrs = {"candles": replace(m1.attrs["candles"], symbol="GBPUSD")}
    with pytest.raises(ModelDataError, match="the M1 bars are of GBPUSD"):
        Backtest(h1, SmaCrossEA, model="ohlc1m", m1=minutes)
    hourly = h1.copy()  # bars of the right symbol but not minutes
    with pytest.raises(ModelDataError, match="H1 bars, not M1"):
        Backtest(h1, SmaCrossEA, model="ohlc1m", m1=hourly)


def test_ticks_at_another_price_level_or_scale_are_refused_even_when_named_alike(market, tmp_path):
    h1, _, ticks = market
    ns = ticks.index.as_unit("ns").asi8
    meta = ticks.attrs["ticks"]
    for factor in (1.18, 100.0):  # another instrument's prices; the same prices with yen-like digits
        scaled = make_ticks(ns, ticks["bid"].to_numpy() * factor, ticks["ask"].to_numpy() * factor, meta)
        with pytest.raises(ModelDataError, match=r"do not fit the EURUSD candles.*another symbol or other"):
            Backtest(h1, SmaCrossEA, model="ticks", ticks=scaled)
    # From the command line a tick file's name says nothing: GBPUSD prices in a file named EURUSD_ticks.csv.
    write_mt5_csv(h1, tmp_path / "EURUSD_H1.csv")
    gbp = make_ticks(ns, ticks["bid"].to_numpy() * 1.18, ticks["ask"].to_numpy() * 1.18, meta)
    write_tick_csv(gbp, tmp_path / "EURUSD_ticks.csv")
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv")
    assert res.returncode == 2 and "do not fit the EURUSD candles" in res.stderr
    assert "Traceback" not in res.stderr


def test_broker_tz_reads_the_tick_file_as_it_reads_the_candles_across_a_dst_switch(market, tmp_path):
    """Files stamped in a New York close broker's clock (UTC+2, UTC+3 from 10 March 2024): --broker-tz
    applies to both; a tick file left in UTC beside broker-time candles is refused, not traded."""
    m1 = synthetic_candles("EURUSD", "M1", None, seed=3, start="2024-03-07", end="2024-03-13")
    ticks = synthetic_ticks(m1, seed=3, ticks_per_minute=4)
    h1 = resample(bars_from_ticks(ticks, "M1"), "H1")
    clock = BrokerClock.parse("+2/us")
    write_mt5_csv(in_clock(h1, clock), tmp_path / "EURUSD_H1.csv")
    write_tick_csv(ticks, tmp_path / "EURUSD_ticks.csv", clock=clock)
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--broker-tz", "+2/us", "--model", "ticks",
              "--ticks-csv", "EURUSD_ticks.csv", "--out", "r")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "history quality 100.00%" in res.stdout
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    expected = Backtest(h1, SmaCrossEA, model="ticks", ticks=ticks, forward=None).run(**SMA).stats
    assert doc["stats"]["total_net_profit"] == pytest.approx(expected["total_net_profit"], abs=1e-6)
    assert doc["stats"]["total_trades"] == expected["total_trades"] > 0
    write_tick_csv(ticks, tmp_path / "EURUSD_utc_ticks.csv")  # the same ticks, stamped in UTC
    bad = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--broker-tz", "+2/us", "--model", "ticks",
              "--ticks-csv", "EURUSD_utc_ticks.csv")  # fmt: skip
    assert bad.returncode == 2 and "another clock" in bad.stderr and "--broker-tz" in bad.stderr
    write_mt5_csv(in_clock(m1, clock), tmp_path / "EURUSD_M1.csv")  # and the minutes of ohlc1m likewise
    ok = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--broker-tz", "+2/us", "--model", "ohlc1m",
             "--m1-csv", "EURUSD_M1.csv", "--out", "m")  # fmt: skip
    assert ok.returncode == 0 and "history quality 100.00%" in ok.stdout, ok.stderr


def test_an_empty_tick_file_or_frame_is_refused(market, tmp_path):
    h1, _, ticks = market
    write_mt5_csv(h1, tmp_path / "EURUSD_H1.csv")
    (tmp_path / "EURUSD_ticks.csv").write_text(HEADER)
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv")
    assert res.returncode == 2 and "EURUSD_ticks.csv: line 1: no ticks in the file" in res.stderr
    (tmp_path / "EURUSD_ticks.csv").write_text("")
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv")
    assert res.returncode == 2 and "EURUSD_ticks.csv" in res.stderr and "Traceback" not in res.stderr
    with pytest.raises(ModelDataError, match="the ticks are empty"):
        Backtest(h1, SmaCrossEA, model="ticks", ticks=ticks.iloc[:0])


def test_a_crossed_quote_is_refused_naming_its_line(market, tmp_path):
    h1, _, ticks = market
    write_mt5_csv(h1, tmp_path / "EURUSD_H1.csv")
    write_tick_csv(ticks, tmp_path / "EURUSD_ticks.csv")
    lines = (tmp_path / "EURUSD_ticks.csv").read_text().splitlines()
    date, time, bid, ask, *rest = lines[500].split("\t")
    lines[500] = "\t".join([date, time, ask, bid, *rest])  # line 501: bid above ask
    (tmp_path / "EURUSD_ticks.csv").write_text("\n".join(lines) + "\n")
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv")
    assert res.returncode == 2 and "line 501" in res.stderr and "ask below bid" in res.stderr


class _Counter(ExpertAdvisor):
    """Buys once with a stop far away and counts the ticks it is shown."""

    seen: list = []  # noqa: RUF012 - read by the test after the run

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(0.1, sl_points=5000)

    def on_tick(self, tick) -> None:
        type(self).seen.append(tick.time_ns)


def test_two_million_ticks_at_one_time_stamp_are_legal_and_worked_as_arrays():
    start = pd.Timestamp("2024-03-07", tz="UTC")
    times = (start + pd.to_timedelta(np.arange(4), unit="h")).as_unit("ns")
    n = 2_000_000
    ns = np.r_[times.asi8[:2], np.full(n, times.asi8[2] + 1_000_000_000), times.asi8[3]]
    bid = np.r_[1.1, 1.1001, np.full(n, 1.1002), 1.1003]
    ticks = make_ticks(ns, bid, bid + 1e-4, TickMeta("EURUSD", 5, "test"))
    h1 = resample(bars_from_ticks(ticks, "M1"), "H1")
    assert list(h1["tick_volume"]) == [1, 1, n, 1]
    result = Backtest(h1, SmaCrossEA, model="ticks", ticks=ticks, forward=None).run(fast=1, slow=2)
    assert result.data["history_quality"] == 100.0
    _Counter.seen = []
    hooked = Backtest(h1, _Counter, model="ticks", ticks=ticks, forward=None).run()
    assert len(_Counter.seen) == n + 2 and hooked.complete  # every tick of the traded bars reached on_tick


def test_ticks_moved_by_whole_hours_are_refused_but_another_feeds_quotes_are_not(market):
    h1, m1, ticks = market
    meta, ns = ticks.attrs["ticks"], ticks.index.as_unit("ns").asi8
    bid, ask = ticks["bid"].to_numpy(), ticks["ask"].to_numpy()
    early = make_ticks(ns - 3 * 3_600_000_000_000, bid, ask, meta)  # a file read 3 h off
    inside = early[(early.index >= h1.index[0]) & (early.index < h1.index[-1] + pd.Timedelta(hours=1))]
    inside.attrs = early.attrs
    with pytest.raises(ModelDataError, match=r"fit best moved \+3 h.*--broker-tz"):
        Backtest(h1, SmaCrossEA, model="ticks", ticks=inside)
    # Another feed: every quote a few points off, trading M1 bars, whose range is a few points too; kept
    # inside its bar's range it is traded, a quote beyond it is refused (test_a_spike_...).
    noise = np.random.default_rng(1).integers(-3, 4, len(bid)) * 1e-5
    minute = np.searchsorted(m1.index.as_unit("ns").asi8, ns, side="right") - 1
    moved = np.clip(bid + noise, m1["low"].to_numpy()[minute], m1["high"].to_numpy()[minute])
    other = make_ticks(ns, moved, np.maximum(ask + noise, moved), meta)
    result = Backtest(m1, SmaCrossEA, model="ticks", ticks=other, forward=None).run(**SMA)
    assert result.data["history_quality"] == 100.0


def test_a_spike_beyond_its_bars_range_is_refused_naming_the_file_and_row(market, tmp_path):
    """One bad tick at 1.2000 in an hour whose high is far below it filled a take-profit there (and the
    history quality still said 100 %); one M1 high at 1.2 fired a TP above its H1 bar's high. MetaTrader
    builds its bars from its ticks and minutes, so they cannot disagree: refused, naming file and row."""
    h1, m1, ticks = market
    write_mt5_csv(h1, tmp_path / "EURUSD_H1.csv")
    spiked = ticks.copy()
    spiked.iloc[700, [spiked.columns.get_loc("bid"), spiked.columns.get_loc("ask")]] = [1.2, 1.2001]
    write_tick_csv(spiked, tmp_path / "EURUSD_ticks.csv")
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv",
              "--out", "r", "-p", "tp_points=300")  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    hour = h1.index[h1.index.searchsorted(ticks.index[700], side="right") - 1]
    assert "EURUSD_ticks.csv: row 701 (" in line and "bid 1.20000 lies above the high" in line
    assert f"of its H1 bar {hour}" in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())  # nothing written
    minutes = m1.copy()
    minutes.iloc[100, minutes.columns.get_loc("high")] = 1.2
    with pytest.raises(ModelDataError, match=r"row 101 .*high 1\.20000 lies above the high .* of its H1 bar"):
        Backtest(h1, SmaCrossEA, model="ohlc1m", m1=minutes)
    low = m1.copy()
    low.iloc[5, low.columns.get_loc("low")] = m1["low"].iloc[:60].min() - 0.0001
    with pytest.raises(ModelDataError, match=r"row 6 .*low .* lies below the low"):
        Backtest(h1, SmaCrossEA, model="ohlc1m", m1=low)


def test_minutes_without_spreads_trade_with_the_default_spread_not_with_none(market):
    h1, m1, _ = market
    bare_h1, bare_m1, tens = h1.copy(), m1.copy(), m1.copy()
    bare_h1["spread"], bare_m1["spread"], tens["spread"] = 0, 0, 10  # as Dukascopy's candle files
    for frame, like in ((bare_h1, h1), (bare_m1, m1), (tens, m1)):
        frame.attrs = like.attrs
    params = {**SMA, "tp_points": 40}
    bare = Backtest(bare_h1, SmaCrossEA, model="ohlc1m", m1=bare_m1, forward=None).run(**params)
    ten = Backtest(bare_h1, SmaCrossEA, model="ohlc1m", m1=tens, forward=None).run(**params)
    assert bare.stats["total_trades"] > 0
    assert bare.stats["total_net_profit"] == ten.stats["total_net_profit"]


def test_minutes_or_ticks_between_the_symbols_points_are_refused_not_rounded_to_a_level(market, tmp_path):
    """A 5-digit symbol's tick at 1.300005 and a minute high of half a point above its bar's were read
    rounded to the grid (``np.rint``), silently: a price the feed never quoted, which a take-profit half a
    point beyond the real high filled at. The bars are refused for this; so are the minutes and ticks,
    naming the file, the row and the price."""
    h1, m1, ticks = market
    write_mt5_csv(h1, tmp_path / "EURUSD_H1.csv")
    between = ticks.copy()
    bid = round(float(between["bid"].iloc[700]), 5)
    quote = [between.columns.get_loc("bid"), between.columns.get_loc("ask")]
    between.iloc[700, quote] = [bid + 5e-6, bid + 1e-4]
    between.attrs = {"ticks": replace(ticks.attrs["ticks"], digits=6)}  # the file as a 6-digit feed writes it
    write_tick_csv(between, tmp_path / "EURUSD_ticks.csv")
    res = cli(tmp_path, "--csv", "EURUSD_H1.csv", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv",
              "--out", "r")  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "EURUSD_ticks.csv: row 701 (" in line and "is not on the symbol's grid of 5-digit prices" in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())  # nothing written
    minutes = m1.copy()
    minutes.iloc[100, minutes.columns.get_loc("close")] = round(float(m1["close"].iloc[100]), 5) + 5e-6
    with pytest.raises(ModelDataError, match=r"row 101 .*EURUSD close 1\.\d+ is not on the symbol's grid"):
        Backtest(h1, SmaCrossEA, model="ohlc1m", m1=minutes)
