"""Optimisation in the ohlc1m and ticks models: each pass is the single backtest with the same parameters in
that mode, on the window's part of the finer data; the mode and its data are part of the study's identity."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pandas as pd
import pytest

from backtests import Backtest
from backtests.optimize import Engine, optimize, walk_forward
from backtests.paths import ModelDataError
from datafeeds import bars_from_ticks, resample, synthetic_candles, synthetic_ticks, write_mt5_csv
from strategies import SmaCrossEA

SPACE = {"fast": "3,5", "slow": "8,12", "sl_points": "60,120"}
FIXED = {"tp_points": 90}
COLUMNS = ["fast", "slow", "sl_points"]


@pytest.fixture(scope="module")
def market():
    m1 = synthetic_candles("EURUSD", "M1", bars=4 * 1440, seed=5, start="2024-01-01")
    return resample(m1, "H1"), m1


def _single(h1, m1, params, forward=None, **kw):
    bt = Backtest(h1, SmaCrossEA, model="ohlc1m", m1=m1, forward=forward, **kw)
    return bt.run(**FIXED, **params).stats


def test_every_pass_equals_its_single_backtest_in_ohlc1m(market):
    h1, m1 = market
    table = optimize(h1, SmaCrossEA, SPACE, fixed=FIXED, workers=0, model="ohlc1m", m1=m1, forward="1/3")
    assert len(table) == 8 and table["error"].isna().all()
    differs = 0
    fs = Backtest(h1, SmaCrossEA, forward="1/3").periods.forward_start
    for _, row in table.iterrows():
        params = {k: row[k] for k in COLUMNS}
        stats = _single(h1.iloc[:fs], m1, params)  # the optimisation period, all of it traded
        assert row["total_net_profit"] == pytest.approx(stats["total_net_profit"], abs=1e-9)
        assert row["total_trades"] == stats["total_trades"]
        if pd.notna(row.get("forward_total_net_profit")):  # the forward re-run, as a backtest's forward third
            fwd = _single(h1, m1, params, forward="1/3")
            assert row["forward_total_net_profit"] == pytest.approx(fwd["total_net_profit"], abs=1e-9)
        opened = Backtest(h1.iloc[:fs], SmaCrossEA, forward=None).run(**FIXED, **params).stats
        differs += opened["total_net_profit"] != stats["total_net_profit"]
    assert differs, "the minutes never changed a result: the test cannot tell the models apart"


def test_the_model_is_part_of_the_study_and_ticks_passes_match_too(market, tmp_path):
    h1, m1 = market
    store = str(tmp_path / "study.db")
    kw = {"fixed": FIXED, "workers": 0, "store_path": store}
    opened = optimize(h1, SmaCrossEA, SPACE, **kw)
    minutes = optimize(h1, SmaCrossEA, SPACE, model="ohlc1m", m1=m1, **kw)
    assert minutes.attrs["ran"] == 8 and minutes.attrs["study"] != opened.attrs["study"]
    ticks = synthetic_ticks(m1, seed=2, ticks_per_minute=6)
    bars = resample(bars_from_ticks(ticks, "M1"), "H1")
    table = optimize(bars, SmaCrossEA, {"fast": "3,5"}, fixed={"slow": 8, "sl_points": 60}, workers=0,
                     model="ticks", ticks=ticks)  # fmt: skip
    for _, row in table.iterrows():
        single = Backtest(bars, SmaCrossEA, model="ticks", ticks=ticks, forward=None)
        stats = single.run(fast=row["fast"], slow=8, sl_points=60).stats
        assert row["total_net_profit"] == pytest.approx(stats["total_net_profit"], abs=1e-9)


def test_walk_forward_windows_take_their_part_of_the_minutes(market):
    h1, m1 = market
    wf = walk_forward(h1, SmaCrossEA, {"fast": "3,5"}, 40, 20, fixed={"slow": 8, "sl_points": 60},
                      workers=0, model="ohlc1m", m1=m1)  # fmt: skip
    assert len(wf.windows) == 3
    first = wf.windows.iloc[0]
    test = h1.iloc[0:60]  # train 0..39 as history, trade 40..59 with the winner
    stats = (
        Backtest(test, SmaCrossEA, model="ohlc1m", m1=m1, forward=test.index[40])
        .run(fast=int(first["fast"]), slow=8, sl_points=60)
        .stats
    )
    assert first["oos_net_profit"] == pytest.approx(stats["total_net_profit"], abs=1e-9)


def test_bad_model_requests_fail_before_any_pass(market):
    h1, m1 = market
    with pytest.raises(ModelDataError, match="needs M1 candles"):
        optimize(h1, SmaCrossEA, SPACE, workers=0, model="ohlc1m")
    with pytest.raises(ModelDataError, match="only used by model 'ohlc1m'"):
        optimize(h1, SmaCrossEA, SPACE, workers=0, m1=m1)
    other = m1.copy()
    other.attrs = {"candles": replace(m1.attrs["candles"], symbol="GBPUSD")}
    with pytest.raises(ModelDataError, match="of GBPUSD"):
        optimize(h1, SmaCrossEA, SPACE, workers=0, model="ohlc1m", m1=other)


def test_the_command_line_optimises_in_ohlc1m_from_csv_files(market, tmp_path):
    h1, m1 = market
    write_mt5_csv(h1, tmp_path / "EURUSD_H1.csv")
    write_mt5_csv(m1, tmp_path / "EURUSD_M1.csv")
    args = [sys.executable, "-m", "neuronet", "optimize", "SmaCrossEA", "-p", "fast=3,5", "-p", "slow=8",
            "--set", "sl_points=60", "--set", "tp_points=90", "--csv", "EURUSD_H1.csv", "--workers", "0",
            "--top", "0", "--out", "o", "--no-progress"]  # fmt: skip
    res = subprocess.run([*args, "--model", "ohlc1m", "--m1-csv", "EURUSD_M1.csv"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "model 1 minute OHLC" in res.stdout
    table = pd.read_csv(tmp_path / "o" / "results.csv")
    for _, row in table.iterrows():
        stats = _single(h1, m1, {"fast": int(row["fast"]), "slow": 8, "sl_points": 60})
        assert row["total_net_profit"] == pytest.approx(stats["total_net_profit"], abs=1e-6)
    bad = subprocess.run([*args, "--m1-csv", "EURUSD_M1.csv", "--out", "o2"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert bad.returncode == 2 and "--m1-csv is only used with --model ohlc1m" in bad.stderr


def test_on_dask_workers_the_minutes_travel_once_and_the_passes_agree(market, monkeypatch):
    h1, m1 = market
    shared = []
    real_share = Engine.share

    def share(self, obj):
        shared.append(obj)
        return real_share(self, obj)

    monkeypatch.setattr(Engine, "share", share)
    table = optimize(h1, SmaCrossEA, SPACE, fixed=FIXED, workers=2, model="ohlc1m", m1=m1)
    assert len(shared) == 1 and shared[0].m1 is m1  # one scatter (broadcast to each worker), with the minutes
    inline = optimize(h1, SmaCrossEA, SPACE, fixed=FIXED, workers=0, model="ohlc1m", m1=m1)
    key = ["fast", "slow", "sl_points"]
    a = table.sort_values(key).reset_index(drop=True)
    b = inline.sort_values(key).reset_index(drop=True)
    pd.testing.assert_series_equal(a["total_net_profit"], b["total_net_profit"])
