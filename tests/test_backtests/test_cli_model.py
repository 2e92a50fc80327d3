"""``neuronet backtest --model ohlc1m`` as a user runs it: a real subprocess, M1 from a MetaTrader CSV."""

import json
import subprocess
import sys

import pandas as pd

from datafeeds import resample, synthetic_candles, write_mt5_csv


def test_ohlc1m_from_csv_files_states_the_model_and_history_quality(tmp_path):
    m1 = synthetic_candles("EURUSD", "M1", bars=5 * 1440, seed=1, start="2024-01-01")
    write_mt5_csv(resample(m1, "H1"), tmp_path / "EURUSD_H1.csv")
    m1 = m1[~((m1.index >= "2024-01-03") & (m1.index < "2024-01-03 06:00"))]  # six hours without minutes
    write_mt5_csv(m1, tmp_path / "EURUSD_M1.csv")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuronet",
            "backtest",
            "SmaCrossEA",
            "--csv",
            "EURUSD_H1.csv",
            "--forward",
            "none",
            "--model",
            "ohlc1m",
            "--m1-csv",
            "EURUSD_M1.csv",
            "-p",
            "sl_points=100",
            "--out",
            "r",
            "--no-progress",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "model: 1 minute OHLC, history quality" in res.stdout
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["data"]["model"] == "ohlc1m" and 90 < doc["data"]["history_quality"] < 100


def test_ticks_from_an_exported_tick_file_state_the_model_and_history_quality(tmp_path):
    from datafeeds import bars_from_ticks, synthetic_ticks
    from datafeeds.tick_csv import write_tick_csv

    m1 = synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=1, start="2024-01-01")
    ticks = synthetic_ticks(m1, seed=1, ticks_per_minute=10)
    write_mt5_csv(resample(bars_from_ticks(ticks, "M1"), "H1"), tmp_path / "EURUSD_H1.csv")
    gap = (ticks.index >= "2024-01-03") & (ticks.index < "2024-01-03 06:00")  # six hours without ticks
    kept = ticks[~gap]
    kept.attrs = ticks.attrs
    write_tick_csv(kept, tmp_path / "EURUSD_ticks.csv")
    res = subprocess.run(
        [sys.executable, "-m", "neuronet", "backtest", "SmaCrossEA", "--csv", "EURUSD_H1.csv", "--forward",
         "none", "--model", "ticks", "--ticks-csv", "EURUSD_ticks.csv", "-p", "sl_points=100", "--out", "r",
         "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "model: Every tick based on real ticks, history quality" in res.stdout
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["data"]["model"] == "ticks" and 85 < doc["data"]["history_quality"] < 100
    assert "Every tick based on real ticks" in (tmp_path / "r" / "report.html").read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "neuronet", "backtest", "SmaCrossEA", "--csv", "EURUSD_H1.csv", "--model",
         "ticks"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode != 0 and "--ticks-csv FILE" in bad.stderr and "Traceback" not in bad.stderr
    old = ticks[ticks.index < "2024-01-02"]
    old.attrs = ticks.attrs
    write_tick_csv(old, tmp_path / "old_ticks.csv")  # none in the span of the bars from 2024-01-03
    none = subprocess.run(
        [sys.executable, "-m", "neuronet", "backtest", "SmaCrossEA", "--csv", "EURUSD_H1.csv", "--from",
         "2024-01-03", "--model", "ticks", "--ticks-csv", "old_ticks.csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert none.returncode != 0 and "no ticks between" in none.stderr and "Traceback" not in none.stderr


def test_ticks_from_the_synthetic_source_make_its_bars(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "neuronet", "backtest", "SmaCrossEA", "--source", "synthetic", "-o",
         "bars=48", "--forward", "none", "--model", "ticks", "-p", "fast=3", "-p", "slow=6", "-p",
         "sl_points=50", "--out", "r", "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "history quality 100.00% (forward bars with ticks)" in res.stdout
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["data"]["bars"] == 48 and doc["data"]["model"] == "ticks"
    exits = [t for t in doc["trades"] if t["exit_reason"] == "sl"]
    # stamped with the time of the tick that hit the stop, not the bar's opening time
    times = [pd.Timestamp(t["exit_time"]) for t in exits]
    assert times and all(t != t.floor("h") for t in times)


def test_synthetic_bars_count_the_eas_bars_in_every_model(tmp_path):
    """``-o bars=N`` is N bars of the EA's timeframe whether the fills are worked on those bars, their
    minutes or their ticks (it once counted the minutes in the two finer modes: 60 times fewer bars)."""
    for model in ("open", "ohlc1m", "ticks"):
        res = subprocess.run(
            [sys.executable, "-m", "neuronet", "backtest", "SmaCrossEA", "--source", "synthetic", "-o",
             "bars=30", "--timeframe", "M30", "--forward", "none", "--model", model, "--out", model,
             "--no-progress"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        doc = json.loads((tmp_path / model / "report.json").read_text())
        assert doc["data"]["bars"] == 30, model
