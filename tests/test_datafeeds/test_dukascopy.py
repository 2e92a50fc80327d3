"""Dukascopy downloads against a real HTTP server on loopback that serves bi5 files made here.

The files are written by this module's own encoder (``struct`` + ``lzma`` in the archive's legacy
``.lzma`` format), and expected bars are computed from the same known rows with plain loops.
"""

from __future__ import annotations

import lzma
import struct
import time
from collections import defaultdict
from datetime import UTC, datetime
from functools import cache

import numpy as np
import pandas as pd
import pytest

from datafeeds.dukascopy import DukascopySource, NoDataError
from datafeeds.dukascopy_fetch import DownloadError, NotFoundError
from datafeeds.errors import CandleDataError

DAYS = ["2023-01-30", "2023-01-31", "2023-02-01", "2023-02-02"]  # Mon..Thu, across a month boundary


def bi5(records: bytes) -> bytes:
    return lzma.compress(records, format=lzma.FORMAT_ALONE) if records else b""


def candle_file(rows) -> bytes:
    """rows: (seconds into the period, open, close, low, high, volume) with integer prices in points."""
    return bi5(b"".join(struct.pack(">5If", *row) for row in rows))


def tick_file(rows) -> bytes:
    """rows: (ms into the hour, ask, bid, ask volume, bid volume)."""
    return bi5(b"".join(struct.pack(">3I2f", *row) for row in rows))


def day_path(symbol: str, day: str, name: str) -> str:
    d = datetime.fromisoformat(day)
    return f"{symbol}/{d.year}/{d.month - 1:02d}/{d.day:02d}/{name}"


@cache
def known_minutes(day: str, seed: int, flats=(5, 6, 7)):
    """A day of minute candles (points) with some flat (zero-volume) minutes; returns the bi5 file and the
    rows a reader must keep, as (utc seconds, o, h, l, c, volume)."""
    rng = np.random.default_rng(seed)
    day0 = int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp())
    price = 107000 + int(rng.integers(-500, 500))
    rows, kept = [], []
    for m in range(1440):
        o = price
        c = o + int(rng.integers(-20, 21))
        h = max(o, c) + int(rng.integers(0, 10))
        lo = min(o, c) - int(rng.integers(0, 10))
        vol = 0.0 if m in flats else float(np.float32(rng.integers(1, 400) / 100))
        if vol == 0.0:
            h = lo = c = o
        rows.append((m * 60, o, c, lo, h, vol))
        if vol:
            kept.append((day0 + m * 60, o, h, lo, c, vol))
        price = c
    return candle_file(rows), tuple(kept)


@pytest.fixture
def minute_archive(archive):
    kept_all = []
    for i, day in enumerate(DAYS):
        data, kept = known_minutes(day, i)
        archive.files[day_path("EURUSD", day, "BID_candles_min_1.bi5")] = data
        kept_all += kept
    archive.files[day_path("EURUSD", "2023-01-29", "BID_candles_min_1.bi5")] = b""  # Sunday: empty file
    return archive, kept_all


def source(archive, tmp_path, **kw) -> DukascopySource:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("rate_limit", 1000.0)
    return DukascopySource(tmp_path / "cache", archive.base_url, **kw)


def test_minute_candles_decode_exactly_and_urls_use_zero_based_months(minute_archive, tmp_path):
    archive, kept = minute_archive
    df = source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-29", end="2023-02-03")
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, [k[0] for k in kept])
    for j, name in enumerate(("open", "high", "low", "close"), start=1):
        np.testing.assert_array_equal(df[name].to_numpy(), [k[j] / 1e5 for k in kept])
    np.testing.assert_array_equal(df["real_volume"].to_numpy(), [round(k[5] * 1e6) for k in kept])
    assert (df["tick_volume"] == 0).all() and (df["spread"] == 0).all()
    meta = df.attrs["candles"]
    assert (meta.symbol, meta.digits, meta.timeframe.name) == ("EURUSD", 5, "M1")
    # January is month 00, February 01; days are not zero-based.
    assert "EURUSD/2023/00/31/BID_candles_min_1.bi5" in archive.requests
    assert "EURUSD/2023/01/01/BID_candles_min_1.bi5" in archive.requests
    assert "EURUSD/2023/00/29/BID_candles_min_1.bi5" in archive.requests
    assert all(a.startswith("neuronet") for a in archive.agents)


def test_minute_candles_aggregate_to_h1_like_hand_computed_bars(minute_archive, tmp_path):
    archive, kept = minute_archive
    src = source(archive, tmp_path, data="minute")
    df = src.load("EURUSD", "H1", start="2023-01-30", end="2023-02-02")
    hours = defaultdict(list)
    for row in kept:
        if row[0] < int(pd.Timestamp("2023-02-02", tz="UTC").value // 10**9):
            hours[row[0] // 3600 * 3600].append(row)
    want = sorted(hours)
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, want)
    np.testing.assert_array_equal(df["open"].to_numpy(), [hours[h][0][1] / 1e5 for h in want])
    np.testing.assert_array_equal(df["high"].to_numpy(), [max(r[2] for r in hours[h]) / 1e5 for h in want])
    np.testing.assert_array_equal(df["low"].to_numpy(), [min(r[3] for r in hours[h]) / 1e5 for h in want])
    np.testing.assert_array_equal(df["close"].to_numpy(), [hours[h][-1][4] / 1e5 for h in want])
    assert df.attrs["candles"].timeframe.name == "H1"
    assert all(p.endswith("BID_candles_min_1.bi5") for p in archive.requests)


def test_hourly_files_are_used_for_h1_and_above_and_d1_follows_the_clock(archive, tmp_path):
    # January 2023: hourly candles for the first 10 days, every hour traded.
    rng = np.random.default_rng(7)
    rows, price = [], 107000
    for h in range(10 * 24):
        o, c = price, price + int(rng.integers(-50, 51))
        rows.append((h * 3600, o, c, min(o, c) - 3, max(o, c) + 4, 10.0 + h))
        price = c
    archive.files["EURUSD/2023/00/BID_candles_hour_1.bi5"] = candle_file(rows)
    src = source(archive, tmp_path, clock="UTC+2")
    df = src.load("EURUSD", "D1", start="2023-01-02", end="2023-01-06")
    assert archive.requests == ["EURUSD/2023/00/BID_candles_hour_1.bi5"]
    # Broker days at UTC+2 open at 22:00 UTC of the day before.
    assert list(df.index) == [pd.Timestamp(f"2023-01-0{d} 22:00", tz="UTC") for d in (2, 3, 4, 5)]
    day = rows[1 * 24 + 22 : 2 * 24 + 22]  # 2023-01-02 22:00 .. 2023-01-03 21:00 UTC (broker 3 January)
    assert df["open"].iloc[0] == day[0][1] / 1e5 and df["close"].iloc[0] == day[-1][2] / 1e5
    assert df["high"].iloc[0] == max(r[4] for r in day) / 1e5
    assert df["low"].iloc[0] == min(r[3] for r in day) / 1e5
    assert df["real_volume"].iloc[0] == round(sum(r[5] for r in day) * 1e6)


def test_ticks_give_tick_counts_spread_and_any_timeframe(archive, tmp_path):
    # 2023-03-01 10:00 UTC, ticks every 20 s; ask - bid alternates 3 and 1 points; USDJPY has 3 digits.
    rows = []
    for k in range(180):
        bid = 150000 + (k % 7) * 3 - (k % 5)
        rows.append((k * 20_000, bid + (3 if k % 2 else 1), bid, 1.5, 0.25 * (k % 4 + 1)))
    archive.files["USDJPY/2023/02/01/10h_ticks.bi5"] = tick_file(rows)
    for hour in range(24):
        archive.files.setdefault(f"USDJPY/2023/02/01/{hour:02d}h_ticks.bi5", b"")
    df = source(archive, tmp_path, data="ticks").load("USDJPY", "M5", start="2023-03-01", end="2023-03-02")
    t0 = int(pd.Timestamp("2023-03-01 10:00", tz="UTC").value // 10**9)
    assert list(df.index.as_unit("s").asi8) == [t0 + 300 * i for i in range(12)]
    first = rows[:15]  # 15 ticks of 20 s in five minutes
    assert df["tick_volume"].iloc[0] == 15
    assert df["open"].iloc[0] == first[0][2] / 1e3 and df["close"].iloc[0] == first[-1][2] / 1e3
    assert df["high"].iloc[0] == max(r[2] for r in first) / 1e3
    assert df["spread"].iloc[0] == 1
    assert df["real_volume"].iloc[0] == round(sum(r[4] for r in first) * 1e6)
    assert df.attrs["candles"].digits == 3
    assert "USDJPY/2023/02/01/10h_ticks.bi5" in archive.requests and len(archive.requests) == 24


def test_second_load_comes_from_the_cache(minute_archive, tmp_path):
    archive, _ = minute_archive
    src = source(archive, tmp_path)
    first = src.load("EURUSD", "M1", start="2023-01-30", end="2023-02-01")
    asked = len(archive.requests)
    again = source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-02-01")
    assert len(archive.requests) == asked
    pd.testing.assert_frame_equal(first, again)
    cached = tmp_path / "cache" / "EURUSD" / "2023" / "00" / "30" / "BID_candles_min_1.bi5"
    assert cached.read_bytes() == archive.files["EURUSD/2023/00/30/BID_candles_min_1.bi5"]


def test_a_rerun_fetches_only_missing_files(minute_archive, tmp_path):
    archive, _ = minute_archive
    source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    archive.requests.clear()
    source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-02-02")
    assert archive.requests == [
        day_path("EURUSD", d, "BID_candles_min_1.bi5") for d in ("2023-01-31", "2023-02-01")
    ]


def test_server_errors_are_retried(minute_archive, tmp_path):
    archive, kept = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.plan[path] = [500, 503]
    df = source(archive, tmp_path, retries=2).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert archive.requests.count(path) == 3
    assert len(df) == sum(1 for k in kept if k[0] < pd.Timestamp("2023-01-31", tz="UTC").value // 10**9)


def test_404_names_the_url_and_is_not_retried(archive, tmp_path):
    with pytest.raises(NotFoundError, match=r"XXXYYY/2023/00/30/BID_candles_min_1\.bi5: HTTP 404") as info:
        source(archive, tmp_path).load("XXXYYY", "M1", start="2023-01-30", end="2023-01-31")
    assert isinstance(info.value, LookupError) and isinstance(info.value, OSError)
    assert len(archive.requests) == 1


def test_403_is_not_retried(minute_archive, tmp_path):
    archive, _ = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.plan[path] = [403]
    with pytest.raises(DownloadError, match=r"HTTP 403.*rate_limit"):
        source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert archive.requests == [path]


def test_network_failure_names_the_url(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/datafeed"  # nothing listens there
        src = DukascopySource(tmp_path, url, retries=1, backoff=0.01)
        with pytest.raises(DownloadError, match=r"EURUSD/2023/00/30/BID_candles_min_1\.bi5: network failure"):
            src.load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")


def test_a_host_that_does_not_resolve_is_not_retried(tmp_path):
    # ".invalid" never resolves (RFC 6761): offline machines see the same DNS failure for the real host.
    src = DukascopySource(tmp_path, "http://archive.invalid/datafeed", retries=3, backoff=30.0)
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"cannot resolve the host 'archive\.invalid'"):
        src.load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert src.fetcher.requests == 1 and time.monotonic() - started < 30


def test_corrupt_file_is_a_clear_error_and_is_not_cached(minute_archive, tmp_path):
    archive, _ = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.files[path] = archive.files[path][: len(archive.files[path]) // 2]  # a whole HTTP body, cut LZMA
    with pytest.raises(CandleDataError, match=r"BID_candles_min_1\.bi5: truncated bi5 file"):
        source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_records_that_are_not_whole_are_a_clear_error(archive, tmp_path):
    archive.files[day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")] = bi5(b"\x00" * 30)
    with pytest.raises(CandleDataError, match="not whole 24-byte records"):
        source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")


def test_interrupted_download_leaves_no_partial_file_and_a_rerun_completes(minute_archive, tmp_path):
    archive, _ = minute_archive
    path = day_path("EURUSD", "2023-01-31", "BID_candles_min_1.bi5")
    archive.plan[path] = [("truncate", 100), ("truncate", 100)]
    with pytest.raises(DownloadError, match="closed after 100 bytes"):
        source(archive, tmp_path, retries=1).load("EURUSD", "M1", start="2023-01-30", end="2023-02-01")
    cached = sorted(
        p.relative_to(tmp_path / "cache").as_posix() for p in (tmp_path / "cache").rglob("*") if p.is_file()
    )
    assert cached == [day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")]  # the complete one only
    archive.requests.clear()
    df = source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-02-01")
    assert archive.requests == [path]
    assert df.index[-1] == pd.Timestamp("2023-01-31 23:59", tz="UTC")


def test_empty_files_mean_no_data(archive, tmp_path):
    for day in ("2023-01-28", "2023-01-29"):
        archive.files[day_path("EURUSD", day, "BID_candles_min_1.bi5")] = b""
    with pytest.raises(NoDataError, match="no EURUSD bars"):
        source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-28", end="2023-01-30")


def test_rate_limit_spaces_requests(minute_archive, tmp_path):
    archive, _ = minute_archive
    t0 = time.monotonic()
    source(archive, tmp_path, rate_limit=20.0).load("EURUSD", "M1", start="2023-01-30", end="2023-02-03")
    assert len(archive.requests) == 4
    assert time.monotonic() - t0 >= 3 / 20.0


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="price_side"):
        DukascopySource(price_side="MID")
    with pytest.raises(ValueError, match="rate_limit"):
        DukascopySource(rate_limit=0)
    with pytest.raises(ValueError, match="data"):
        DukascopySource(data="seconds")
    with pytest.raises(ValueError, match="hourly archive files cannot give M5"):
        DukascopySource(data="hour").load("EURUSD", "M5", start="2023-01-01", end="2023-01-02")


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("timeout", float("nan"), "timeout"),
        ("timeout", float("inf"), "timeout"),
        ("timeout", 1e9, "timeout"),
        ("timeout", 0, "timeout"),
        ("rate_limit", float("nan"), "rate_limit"),
        ("backoff", float("inf"), "backoff"),
        ("retries", 10**6, "retries"),
    ],
)
def test_waits_that_would_never_end_are_refused(tmp_path, option, value, words):
    """No deadline can be infinite, NaN or absurd: each is one line before any request."""
    from datafeeds.errors import DataError

    with pytest.raises(DataError, match=words):
        DukascopySource(tmp_path, **{option: value})


def test_through_the_registry(minute_archive, tmp_path):
    from datafeeds.sources import load_validated

    archive, _ = minute_archive
    report = load_validated(
        "dukascopy",
        "EURUSD",
        "M15",
        "2023-01-30",
        "2023-02-03",
        cache_dir=str(tmp_path),
        base_url=archive.base_url,
        data="minute",
        rate_limit=1000,
    )
    assert len(report.frame) == 4 * 96 and report.unexpected_gaps == []
    assert report.frame.attrs["candles"].source == "dukascopy:BID:minute"


def test_the_current_period_is_not_cached_and_may_be_unpublished(archive, tmp_path):
    today = pd.Timestamp.now(tz="UTC").floor("D")
    yesterday = today - pd.Timedelta(days=1)
    data, kept = known_minutes(yesterday.strftime("%Y-%m-%d"), 11)
    archive.files[day_path("EURUSD", yesterday.strftime("%Y-%m-%d"), "BID_candles_min_1.bi5")] = data
    # Today's file is not there yet (404): that is "no data yet", not an unknown symbol.
    df = source(archive, tmp_path).load("EURUSD", "M1", start=yesterday, end=today + pd.Timedelta(days=1))
    assert len(df) == len(kept)
    assert day_path("EURUSD", today.strftime("%Y-%m-%d"), "BID_candles_min_1.bi5") in archive.requests
    cached = [p.name for p in (tmp_path / "cache").rglob("*.bi5")]
    settled = (yesterday + pd.Timedelta(days=1, hours=2)) <= pd.Timestamp.now(tz="UTC")
    assert cached == (["BID_candles_min_1.bi5"] if settled else [])


def test_a_damaged_cache_file_is_downloaded_again(minute_archive, tmp_path, caplog):
    archive, _ = minute_archive
    first = source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    cached = tmp_path / "cache" / day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    cached.write_bytes(cached.read_bytes()[:50])
    archive.requests.clear()
    again = source(archive, tmp_path).load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    pd.testing.assert_frame_equal(first, again)
    assert archive.requests == [day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")]
    assert "downloading it again" in caplog.text
    assert cached.read_bytes() == archive.files[archive.requests[0]]


def test_a_bi5_that_inflates_to_gigabytes_is_refused_without_inflating_it(monkeypatch):
    import tracemalloc

    from datafeeds import bi5

    monkeypatch.setattr(bi5, "MAX_PAYLOAD", 2**20)
    bomb = lzma.compress(bytes(64 * 2**20), format=lzma.FORMAT_ALONE)  # 64 MiB of zeros in ~10 KB
    assert len(bomb) < 2**16
    tracemalloc.start()
    with pytest.raises(CandleDataError, match="inflates beyond"):
        bi5.read_ticks(bomb, "EURUSD/2023/00/02/10h_ticks.bi5")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 24 * 2**20  # the decoder's 8 MiB dictionary and 1 MiB of output, not 64 MiB


def test_a_server_that_drips_its_body_is_bounded_by_the_timeout(minute_archive, tmp_path):
    archive, _ = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.plan[path] = [("drip", 0.05)]  # each byte well inside the socket time-out, the file never
    src = DukascopySource(tmp_path / "cache", archive.base_url, retries=0, timeout=0.5)
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"did not arrive within 0\.5 s"):
        src.load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    "action, why",
    [
        (("drip-headers", 0.2), "a header byte every 0.2 s: each read is quick, the headers never end"),
        (("silent", 30), "accepts the request and says nothing"),
        (("garbage", 5000), "answers bytes that are not HTTP"),
    ],
    ids=["drip-headers", "silent", "garbage"],
)
def test_every_wait_of_a_download_ends_by_its_deadline(minute_archive, tmp_path, action, why):
    """The timeout bounds the whole request, headers included, whatever the server does."""
    archive, _ = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.plan[path] = [action]
    src = DukascopySource(tmp_path / "cache", archive.base_url, retries=0, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"EURUSD/2023/00/30/BID_candles_min_1\.bi5: ") as err:
        src.load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert time.monotonic() - started < 4, why
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "cache").rglob("*.bi5"))


def test_a_drip_then_a_good_answer_is_retried_to_success(minute_archive, tmp_path):
    archive, kept = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.plan[path] = [("drip-headers", 0.3)]
    src = DukascopySource(tmp_path / "cache", archive.base_url, retries=1, backoff=0.01, timeout=1.0)
    df = src.load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
    assert len(df) == sum(1 for k in kept if k[0] < pd.Timestamp("2023-01-31", tz="UTC").value // 10**9)
    assert archive.requests == [path, path]


def test_the_command_line_bounds_a_dripping_archive(minute_archive, tmp_path, monkeypatch, capsys):
    from neuronet.cli import main

    archive, _ = minute_archive
    path = day_path("EURUSD", "2023-01-30", "BID_candles_min_1.bi5")
    archive.plan[path] = [("drip-headers", 0.5)] * 3
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    started = time.monotonic()
    with pytest.raises(SystemExit) as code:
        main(["data", "show", "EURUSD", "M1", "--source", "dukascopy", "--from", "2023-01-30",
              "--to", "2023-01-31", "-o", f"base_url={archive.base_url}", "-o", "timeout=1",
              "-o", "retries=0"])  # fmt: skip
    err = capsys.readouterr().err
    assert code.value.code == 2 and len(err.strip().splitlines()) == 1 and "did not arrive within 1 s" in err
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("drip", [None, 0.2], ids=["silent", "drip"])
def test_a_tls_handshake_that_never_ends_is_bounded_too(tmp_path, drip):
    """https: the deadline watches the TLS socket before its handshake starts."""
    import socket
    import threading

    stop = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)

        def peer() -> None:
            conn, _ = server.accept()
            with conn:
                while not stop.wait(drip or 0.1):
                    if drip:
                        try:
                            conn.sendall(b"\x16")  # a TLS record type byte, a byte at a time
                        except OSError:
                            return

        thread = threading.Thread(target=peer, daemon=True)
        thread.start()
        url = f"https://127.0.0.1:{server.getsockname()[1]}/datafeed"
        src = DukascopySource(tmp_path, url, retries=0, timeout=1.0)
        started = time.monotonic()
        with pytest.raises(DownloadError, match="did not arrive within 1 s"):
            src.load("EURUSD", "M1", start="2023-01-30", end="2023-01-31")
        assert time.monotonic() - started < 4
        stop.set()
        thread.join(5)
