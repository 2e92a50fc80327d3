"""``neuronet backtest --model ticks|ohlc1m`` with the data of a remote source, end to end through the real
entry point: the simulated terminal behind a real RPyC server (candles, M1 bars and ``copy_ticks_range``
of one market) and a Dukascopy archive served over real HTTP on loopback (hourly and minute candle files
and hourly tick files, made from the same ticks)."""

from __future__ import annotations

import json
import lzma
import struct

import numpy as np
import pandas as pd
import pytest

from datafeeds import bars_from_ticks, load_candles, load_ticks, resample, synthetic_candles, synthetic_ticks
from neuronet.cli import main

EA = ("SmaCrossEA", "-p", "fast=3", "-p", "slow=8", "-p", "sl_points=60", "-p", "tp_points=120")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache"


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def report(folder: str) -> dict:
    with open(f"{folder}/report.json") as f:
        return json.load(f)


# -- the simulated terminal --------------------------------------------------------------------------------


def backtest_mt5(capsys, mt5_server, model: str, out: str):
    host, port = mt5_server
    return run(
        capsys, "backtest", *EA, "-s", "mt5", "-o", f"host={host}", "-o", f"port={port}", "--broker-tz",
        "+2/us", "--from", "2023-06-05", "--to", "2023-06-10", "--forward", "none", "--model", model,
        "--out", out, "--no-progress",
    )  # fmt: skip


def test_the_terminals_minutes_and_ticks_make_up_its_hours_across_a_dst_switch(mt5_server, mt5sim):
    host, port = mt5_server
    kw = {"cache": False, "host": host, "port": port, "clock": "UTC+2/us"}
    window = ("2023-03-09", "2023-03-15")  # the US clocks change on 12 March: the broker goes UTC+2 -> +3
    h1 = load_candles("mt5", "EURUSD", "H1", *window, **kw)
    m1 = load_candles("mt5", "EURUSD", "M1", *window, **kw)
    ticks = load_ticks("mt5", "EURUSD", *window, host=host, port=port, clock="UTC+2/us")
    ohlc = ["open", "high", "low", "close"]
    np.testing.assert_array_equal(resample(m1, "H1")[ohlc], h1[ohlc])
    built = bars_from_ticks(ticks, "H1")
    assert built.index.equals(h1.index)
    np.testing.assert_array_equal(built[ohlc], h1[ohlc])
    np.testing.assert_array_equal(built["spread"], h1["spread"])


def test_ticks_from_the_terminal_trade_at_its_candles_prices(capsys, mt5_server, mt5sim):
    code, out, err = backtest_mt5(capsys, mt5_server, "ticks", "r")
    assert code == 0, err
    assert "model: Every tick based on real ticks, history quality 100.00% (forward bars with ticks)" in out
    doc = report("r")
    assert doc["data"]["model"] == "ticks" and doc["data"]["source"].startswith("mt5:")
    trades = doc["trades"]
    assert len(trades) >= 5
    assert mt5sim.calls["copy_ticks_range"] >= 5  # a day per call
    host, port = mt5_server
    h1 = load_candles("mt5", "EURUSD", "H1", "2023-06-05", "2023-06-10", cache=False, host=host, port=port,
                      clock="UTC+2/us")  # fmt: skip
    for t in trades:  # a market order fills at its bar's first tick: the bar's open (bid), plus its spread
        bar = h1.loc[pd.Timestamp(t["entry_time"])]
        ask = round(bar["open"] + bar["spread"] * 1e-5, 5)
        assert t["entry_price"] == pytest.approx(ask if t["type"] == "buy" else bar["open"], abs=1e-9)
    stops = [t for t in trades if t["exit_reason"] in ("sl", "tp")]
    assert stops and all(pd.Timestamp(t["exit_time"]).second in (0, 15, 30, 59) for t in stops)


def test_minutes_from_the_terminal_decide_sl_and_tp_at_their_levels(capsys, mt5_server, mt5sim):
    code, out, err = backtest_mt5(capsys, mt5_server, "ohlc1m", "r")
    assert code == 0, err
    assert "model: 1 minute OHLC, history quality 100.00% (forward bars with M1 bars)" in out
    trades = report("r")["trades"]
    assert len(trades) >= 5 and mt5sim.calls["copy_rates_range"] >= 2  # H1 and M1
    exits = [t for t in trades if t["exit_reason"] in ("sl", "tp")]
    assert exits
    for t in exits:  # a level crossed between two path points fills at the level, stamped with its minute
        level = t["sl"] if t["exit_reason"] == "sl" else t["tp"]
        assert t["exit_price"] == pytest.approx(level, abs=1.5e-5)
        assert pd.Timestamp(t["exit_time"]).second == 0


# -- the Dukascopy archive ---------------------------------------------------------------------------------

DAYS = ("2023-03-01", "2023-03-02")  # Wednesday and Thursday
HOLE = pd.Timestamp("2023-03-02 09:00", tz="UTC")  # an hour whose tick file is empty


def _bi5(records: bytes) -> bytes:
    return lzma.compress(records, format=lzma.FORMAT_ALONE) if records else b""


def _points(prices) -> np.ndarray:
    return np.rint(np.asarray(prices, dtype=np.float64) * 1e5).astype(np.int64)


def _candles(frame: pd.DataFrame, start: pd.Timestamp) -> bytes:
    seconds = (frame.index - start).total_seconds().astype(np.int64)
    o, c, lo, hi = (_points(frame[k]) for k in ("open", "close", "low", "high"))
    return _bi5(b"".join(struct.pack(">5If", *row, 1.5) for row in zip(seconds, o, c, lo, hi, strict=True)))


@pytest.fixture
def dukascopy(archive):
    """One market in every kind of file: ticks, M1 candles built from them, H1 candles from those."""
    m1 = synthetic_candles("EURUSD", "M1", None, seed=4, start=DAYS[0], end="2023-03-03")
    ticks = synthetic_ticks(m1, seed=4, ticks_per_minute=4)
    archive.files["EURUSD/2023/02/BID_candles_hour_1.bi5"] = _candles(
        resample(m1, "H1"), pd.Timestamp("2023-03-01", tz="UTC")
    )
    for day in DAYS:
        start = pd.Timestamp(day, tz="UTC")
        part = m1[(m1.index >= start) & (m1.index < start + pd.Timedelta(days=1))]
        archive.files[f"EURUSD/2023/02/{start.day:02d}/BID_candles_min_1.bi5"] = _candles(part, start)
        for hour in range(24):
            t0 = start + pd.Timedelta(hours=hour)
            inside = (ticks.index >= t0) & (ticks.index < t0 + pd.Timedelta(hours=1))
            rows = ticks[inside] if t0 != HOLE else ticks[:0]
            ms = ((rows.index - t0).total_seconds() * 1000).round().astype(np.int64)
            body = b"".join(
                struct.pack(">3I2f", *r, 1.0, 1.0)
                for r in zip(ms, _points(rows["ask"]), _points(rows["bid"]), strict=True)
            )
            archive.files[f"EURUSD/2023/02/{start.day:02d}/{hour:02d}h_ticks.bi5"] = _bi5(body)
    return archive


def backtest_dukascopy(capsys, archive, model: str, out: str):
    return run(
        capsys, "backtest", *EA, "-s", "dukascopy", "-o", f"base_url={archive.base_url}", "-o",
        "cache_dir=archive", "-o", "rate_limit=1000", "--from", DAYS[0], "--to", "2023-03-03",
        "--forward", "none", "--model", model, "--out", out, "--no-progress",
    )  # fmt: skip


def test_dukascopy_ticks_with_an_hour_missing_say_the_quality_and_the_fallback(capsys, dukascopy):
    code, out, err = backtest_dukascopy(capsys, dukascopy, "ticks", "r")
    assert code == 0, err
    doc = report("r")
    data = doc["data"]
    assert data["model"] == "ticks" and data["source"].startswith("dukascopy")
    forward = data["bars"] - 1  # SmaCrossEA studies one bar
    assert data["history_quality"] == round(100 * (forward - 1) / forward, 2)  # one hour without ticks
    assert "bars without them were worked on their own OHLC" in out
    assert len(doc["trades"]) >= 5
    assert any(f"{h}h_ticks.bi5" in r for r in dukascopy.requests for h in ("00", "23"))


def test_dukascopy_minutes_trade_through_ohlc1m(capsys, dukascopy):
    code, out, err = backtest_dukascopy(capsys, dukascopy, "ohlc1m", "r")
    assert code == 0, err
    assert "model: 1 minute OHLC, history quality 100.00%" in out
    assert "carry no spread" in err  # the archive's candles have none: the default spread, said
    doc = report("r")
    assert len(doc["trades"]) >= 5
    assert any(r.endswith("BID_candles_min_1.bi5") for r in dukascopy.requests)
    for t in doc["trades"]:
        if t["exit_reason"] in ("sl", "tp"):
            level = t["sl"] if t["exit_reason"] == "sl" else t["tp"]
            assert t["exit_price"] == pytest.approx(level, abs=1.5e-5)
