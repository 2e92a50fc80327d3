"""Tick sources: the tick frame's checks, the terminal's tick export, synthetic ticks, Dukascopy and the
terminal's ``copy_ticks_range``, all through ``load_ticks``."""

from __future__ import annotations

import lzma
import struct

import numpy as np
import pandas as pd
import pytest

from datafeeds import resample, synthetic_candles
from datafeeds.clock import BrokerClock
from datafeeds.errors import UnknownSourceError
from datafeeds.sources import load_ticks
from datafeeds.synthetic_ticks import synthetic_ticks
from datafeeds.tick_csv import read_tick_csv
from datafeeds.ticks import TickDataError, TickMeta, bars_from_ticks, make_ticks

META = TickMeta("EURUSD", 5, "test")
HEADER = "<DATE>\t<TIME>\t<BID>\t<ASK>\t<LAST>\t<VOLUME>\t<FLAGS>\n"


def _write(tmp_path, body, name="EURUSD_202401020000_202401030000.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(
        (HEADER + body).encode(encoding) if encoding != "utf-16" else (HEADER + body).encode("utf-16")
    )
    return path


def test_make_ticks_refuses_steps_back_in_time_bad_and_crossed_prices_but_takes_equal_times():
    ns = np.array([0, 1_000, 1_000, 2_000]) + pd.Timestamp("2024-01-02", tz="UTC").value
    bid = np.array([1.1, 1.1001, 1.1002, 1.1003])
    ticks = make_ticks(ns, bid, bid + 1e-4, META)
    assert len(ticks) == 4 and ticks.index.tz is not None and ticks.attrs["ticks"] == META
    with pytest.raises(TickDataError, match="out of time order"):
        make_ticks(ns[::-1], bid, bid + 1e-4, META)
    with pytest.raises(TickDataError, match="finite positive"):
        make_ticks(ns, np.r_[bid[:3], np.nan], bid + 1e-4, META)
    with pytest.raises(TickDataError, match="ask below bid"):
        make_ticks(ns, bid, bid - 1e-4, META)


def test_the_terminal_export_is_read_with_empty_fields_carried_forward(tmp_path):
    body = (
        "2024.01.02\t00:00:00.123\t1.10412\t1.10415\t\t\t6\n"
        "2024.01.02\t00:00:00.301\t\t1.10416\t\t\t4\n"
        "2024.01.02\t00:00:00.301\t1.10410\t\t\t\t2\n"
    )
    ticks = read_tick_csv(_write(tmp_path, body), clock=BrokerClock.parse("UTC+2"))
    assert list(ticks.bid) == [1.10412, 1.10412, 1.10410]
    assert list(ticks.ask) == [1.10415, 1.10416, 1.10416]
    assert list(ticks.volume) == [0.0, 0.0, 0.0]
    assert ticks.index[0] == pd.Timestamp("2024-01-01 22:00:00.123", tz="UTC")  # broker UTC+2 -> UTC
    assert ticks.index[1] == ticks.index[2]  # equal times stay
    meta = ticks.attrs["ticks"]
    assert (meta.symbol, meta.digits) == ("EURUSD", 5)
    again = read_tick_csv(_write(tmp_path, body, name="x.csv", encoding="utf-16"), symbol="EURUSD")
    assert list(again.bid) == [1.10412, 1.10412, 1.10410]  # the terminal's UTF-16 with its byte-order mark


@pytest.mark.parametrize(
    ("body", "line", "match"),
    [
        ("2024.01.02\t00:00:00.123\t1.1\t1.1001\t\t\t6\n2024.13.02\t00:00:01.000\t1.1\t1.1001\t\t\t6\n", 3,
         "date and time"),
        ("2024.01.02\t00:00:00.123\t1.1\t1.1001\t\t\t6\n2024.01.02\t00:00:01.000\tabc\t1.1001\t\t\t6\n", 3,
         "number in <BID>"),
        ("2024.01.02\t00:00:00.123\t\t1.1001\t\t\t4\n", 2, "the first tick has none"),
        ("2024.01.02\t00:00:02.000\t1.1\t1.1001\t\t\t6\n2024.01.02\t00:00:01.000\t1.1\t1.1001\t\t\t6\n", 3,
         "out of time order"),
        ("2024.01.02\t00:00:00.123\t1.1002\t1.1001\t\t\t6\n", 2, "ask below bid"),
        ("2024.01.02\t00:00:00.123\t1.1\t1.1001\t\t\t6\n2024.01.02\t00:00:01.000\t1.1\t1.1001\t\t\t6\t9\n", 3,
         "8 tab-separated fields where the header names 7"),
    ],
)  # fmt: skip
def test_bad_tick_files_name_the_file_and_line(tmp_path, body, line, match):
    """Including a line with one field too many (it was pandas' ParserError, naming neither)."""
    path = _write(tmp_path, body)
    with pytest.raises(TickDataError, match=match) as info:
        read_tick_csv(path)
    assert info.value.line == line and str(path) in str(info.value)


def test_a_file_that_is_not_a_tick_export_is_refused(tmp_path):
    path = tmp_path / "EURUSD.csv"
    path.write_text("<DATE>\t<TIME>\t<OPEN>\t<HIGH>\t<LOW>\t<CLOSE>\n2024.01.02\t00:00\t1\t1\t1\t1\n")
    with pytest.raises(TickDataError, match="not a MetaTrader tick export"):
        read_tick_csv(path)


def test_synthetic_ticks_make_up_the_synthetic_bars_exactly():
    m1 = synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=4, start="2024-03-04")
    ticks = synthetic_ticks(m1, seed=9)
    assert len(ticks) > 60 * len(m1)  # about 80 a minute
    built = bars_from_ticks(ticks, "M1")
    assert built.index.equals(m1.index)
    for col in ("open", "high", "low", "close", "spread"):
        np.testing.assert_array_equal(built[col].to_numpy(), m1[col].to_numpy(), err_msg=col)
    h1 = resample(built, "H1")
    np.testing.assert_array_equal(
        h1[["open", "high", "low", "close"]], resample(m1, "H1")[["open", "high", "low", "close"]]
    )
    assert synthetic_ticks(m1, seed=9).equals(ticks) and not synthetic_ticks(m1, seed=8).equals(ticks)
    assert (ticks.ask - ticks.bid).min() > 0


def test_load_ticks_by_source_name(tmp_path):
    ticks = load_ticks("synthetic", "EURUSD", "2024-03-04", "2024-03-05", seed=2)
    m1 = synthetic_candles("EURUSD", "M1", None, seed=2, start="2024-03-04", end="2024-03-05")
    np.testing.assert_array_equal(bars_from_ticks(ticks, "M1")["close"], m1["close"])
    path = _write(
        tmp_path,
        "2024.01.02\t00:00:00.123\t1.1\t1.1001\t\t\t6\n2024.01.02\t00:00:05.000\t1.2\t1.2001\t\t\t6\n",
    )
    one = load_ticks("csv", start="2024-01-02", end="2024-01-02 00:00:01", path=str(path))
    assert list(one.bid) == [1.1]
    with pytest.raises(UnknownSourceError, match="unknown tick source 'sample'"):
        load_ticks("sample")


def _tick_file(rows) -> bytes:
    """rows: (ms into the hour, ask, bid, ask volume, bid volume), prices in points."""
    return lzma.compress(b"".join(struct.pack(">3I2f", *r) for r in rows), format=lzma.FORMAT_ALONE)


def test_dukascopy_ticks_come_from_the_hourly_files_through_the_cache(archive, tmp_path):
    rows = [(k * 1000, 110_010 + k, 110_000 + k, 1.0, 2.0) for k in range(5)]
    archive.files["EURUSD/2023/02/01/10h_ticks.bi5"] = _tick_file(rows)
    archive.files["EURUSD/2023/02/01/11h_ticks.bi5"] = b""
    opts = {"cache_dir": str(tmp_path / "cache"), "base_url": archive.base_url, "rate_limit": 1000.0}
    ticks = load_ticks("dukascopy", "EURUSD", "2023-03-01 10:00", "2023-03-01 12:00", **opts)
    assert list(ticks.bid) == [1.1, 1.10001, 1.10002, 1.10003, 1.10004]
    assert list(ticks.ask) == [1.1001, 1.10011, 1.10012, 1.10013, 1.10014]
    assert ticks.index[1] == pd.Timestamp("2023-03-01 10:00:01", tz="UTC")
    asked = len(archive.requests)
    load_ticks("dukascopy", "EURUSD", "2023-03-01 10:00", "2023-03-01 12:00", **opts)
    assert len(archive.requests) == asked  # settled hours come from the cache


def test_the_terminal_gives_ticks_through_copy_ticks_range_page_by_page(native_mt5):
    from datafeeds.terminal import TerminalSource

    native_mt5.configure(maxbars=50)  # 4 ticks a minute: a day takes many pages cut at the cap
    with TerminalSource(clock=BrokerClock(2, "us")) as src:
        ticks = src.load_ticks("EURUSD", "2023-03-07 10:00", "2023-03-07 12:00")
        m1 = src.load("EURUSD", "M1", "2023-03-07 10:00", "2023-03-07 12:00")
    assert len(ticks) == 4 * len(m1) == 480
    built = bars_from_ticks(ticks, "M1")
    assert built.index.equals(m1.index)
    np.testing.assert_array_equal(
        built[["open", "high", "low", "close"]], m1[["open", "high", "low", "close"]]
    )
    assert ticks.index[0] == pd.Timestamp("2023-03-07 10:00", tz="UTC")
