"""The read-through cache in front of the terminal source: the simulated terminal over a real RPyC server
process, real store files in a temporary cache folder. Calls are counted by the simulator itself."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from datafeeds import load_candles, meta_of
from datafeeds.store import CandleStore, read_npz_entry, write_npz
from datafeeds.terminal_errors import NoBarsError

H1 = 16385
BROKER = "UTC+2/us"  # the simulator's server clock


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def load(mt5_server):
    host, port = mt5_server

    def run(start=None, end=None, symbol="EURUSD", timeframe="H1", **kw):
        kw.setdefault("clock", BROKER)
        return load_candles("mt5", symbol, timeframe, start, end, host=host, port=port, backoff=0.01, **kw)

    return run


def calls(sim) -> dict[str, int]:
    return {k: v for k, v in dict(sim.calls).items() if v}


def range_calls(sim, run) -> int:
    """How many ``copy_rates_range`` calls ``run()`` makes."""
    before = calls(sim).get("copy_rates_range", 0)
    run()
    return calls(sim).get("copy_rates_range", 0) - before


def stamp(utc_seconds) -> pd.Timestamp:
    return pd.Timestamp(int(utc_seconds), unit="s", tz="UTC")


def truth(sim_market, lo: int, hi: int, symbol: str = "EURUSD", tf: int = H1):
    """The simulator's bars ``lo:hi`` (positions) as (utc seconds, close)."""
    rates, utc = sim_market.history(symbol, tf)
    return utc[lo:hi], rates["close"][lo:hi]


def entry_path(cache_dir, mt5_server, clock="UTC+2-us", symbol="EURUSD", tf="H1"):
    host, port = mt5_server
    return cache_dir / "candles" / "mt5" / f"{host}_{port}" / symbol / f"{tf}@{clock}.npz"


def tamper(path, position: int, new_close: float) -> float:
    """Rewrite a stored bar's close (inside its high/low, so still valid): a marker only the file holds."""
    df, header = read_npz_entry(path)
    old = float(df["close"].iloc[position])
    df.iloc[position, df.columns.get_loc("close")] = new_close
    keep = {k: v for k, v in header.items() if k in ("source", "feed", "server", "coverage")}
    write_npz(path, df, keep)
    return old


def inside(df, i: int) -> float:
    """A close price that differs from bar ``i``'s and stays within its range."""
    lo, hi, c = df["low"].iloc[i], df["high"].iloc[i], df["close"].iloc[i]
    return float((lo + hi) / 2) if (lo + hi) / 2 != c else float(hi)


def test_first_load_fetches_and_stores_a_second_makes_no_terminal_call(
    load, mt5sim, sim_market, cache_dir, mt5_server
):
    t, close = truth(sim_market, 1000, 1600)
    df = load(stamp(t[0]), stamp(t[-1] + 3600))
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, t)
    np.testing.assert_array_equal(df["close"].to_numpy(), close)
    assert calls(mt5sim)["copy_rates_range"] >= 1
    path = entry_path(cache_dir, mt5_server)
    assert path.is_file()

    before = calls(mt5sim)
    again = load(stamp(t[0]), stamp(t[-1] + 3600))
    assert calls(mt5sim) == before  # not even a connection
    pd.testing.assert_frame_equal(again, df)
    assert meta_of(again) == meta_of(df)
    # A window inside the stored one, starting and ending on a weekend, is served from disk too.
    inner = load(stamp(t[100]) - pd.Timedelta(days=2), stamp(t[300]))
    assert calls(mt5sim) == before
    pd.testing.assert_frame_equal(
        inner, df[(df.index >= stamp(t[100]) - pd.Timedelta(days=2)) & (df.index < stamp(t[300]))]
    )


def test_a_later_window_fetches_only_the_new_bars(load, mt5sim, sim_market, cache_dir, mt5_server):
    mt5sim.configure(maxbars=100)
    t, close = truth(sim_market, 1000, 1700)
    end = stamp(t[-1] + 3600)
    assert range_calls(mt5sim, lambda: load(stamp(t[0]), stamp(t[600]))) >= 6  # 600 bars, pages of 100
    path = entry_path(cache_dir, mt5_server)
    tamper(path, 10, inside(read_npz_entry(path)[0], 10))
    new_part_alone = range_calls(mt5sim, lambda: load(stamp(t[600]), end, cache=False))

    df = None

    def extend():
        nonlocal df
        df = load(stamp(t[0]), end)

    assert range_calls(mt5sim, extend) == new_part_alone  # the 100 new bars only, nothing refetched
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, t)
    assert df["close"].iloc[10] != close[10]  # the stored bar came from disk
    np.testing.assert_array_equal(df["close"].to_numpy()[600:], close[600:])
    stored, header = read_npz_entry(path)
    assert len(stored) == len(t) and header["coverage"] == [[int(t[0]), int(t[-1]) + 3600]]


def test_an_earlier_start_fetches_only_the_head(load, mt5sim, sim_market):
    mt5sim.configure(maxbars=100)
    t, close = truth(sim_market, 1000, 1450)
    end = stamp(t[-1] + 3600)
    load(stamp(t[300]), end)
    head_alone = range_calls(mt5sim, lambda: load(stamp(t[0]), stamp(t[300]), cache=False))
    whole = range_calls(mt5sim, lambda: load(stamp(t[0]), end, cache=False))
    assert range_calls(mt5sim, lambda: load(stamp(t[0]), end)) == head_alone < whole
    np.testing.assert_array_equal(load(stamp(t[0]), end)["close"].to_numpy(), close)


def test_the_forming_bar_is_never_stored_and_an_open_end_asks_for_new_bars(
    load, mt5sim, sim_market, cache_dir, mt5_server
):
    _, utc = sim_market.history("EURUSD", H1)
    start = stamp(utc[-200])
    df = load(start)  # up to now
    assert df.index[-1] == stamp(utc[-2])  # the last final bar; utc[-1] is still forming
    stored, header = read_npz_entry(entry_path(cache_dir, mt5_server))
    assert stored.index[-1] == stamp(utc[-2])
    assert header["coverage"][-1][1] == int(utc[-1])  # known in full up to the forming bar's open
    # Asking beyond the present stores nothing past the forming bar either.
    load(start, stamp(utc[-1]) + pd.Timedelta(days=3))
    assert read_npz_entry(entry_path(cache_dir, mt5_server))[0].index[-1] == stamp(utc[-2])
    # Without an end the terminal is asked whether new bars exist, but no history is fetched again.
    before = calls(mt5sim)
    again = load(start)
    after = calls(mt5sim)
    assert after.get("copy_rates_range", 0) == before.get("copy_rates_range", 0)
    assert after["copy_rates_from_pos"] == before["copy_rates_from_pos"] + 1  # just the forming bar
    pd.testing.assert_frame_equal(again, df)


def test_whole_history_without_a_start_is_kept_too(load, mt5sim, sim_market):
    rates, utc = sim_market.history("EURUSD", H1)
    end = stamp(utc[-100])
    df = load(end=end)  # from the oldest bar the terminal holds
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, utc[:-100])
    before = calls(mt5sim)
    pd.testing.assert_frame_equal(load(end=end), df)
    assert calls(mt5sim) == before
    tail_alone = range_calls(mt5sim, lambda: load(end, cache=False))
    before = calls(mt5sim)
    latest = load()  # the rest up to now: 99 final bars, asked for by range only
    np.testing.assert_array_equal(latest["close"].to_numpy(), rates["close"][:-1])
    after = calls(mt5sim)
    assert after["copy_rates_from_pos"] == before["copy_rates_from_pos"] + 1  # the forming bar, no walk back
    assert after["copy_rates_range"] == before["copy_rates_range"] + tail_alone


def test_refresh_fetches_the_window_again_and_replaces_it(load, mt5sim, sim_market, cache_dir, mt5_server):
    t, close = truth(sim_market, 2000, 2300)
    window = (stamp(t[0]), stamp(t[-1] + 3600))
    df = load(*window)
    path = entry_path(cache_dir, mt5_server)
    tamper(path, 5, inside(df, 5))
    assert load(*window)["close"].iloc[5] != close[5]
    before = calls(mt5sim).get("copy_rates_range", 0)
    fresh = load(*window, cache="refresh")
    assert calls(mt5sim)["copy_rates_range"] > before
    np.testing.assert_array_equal(fresh["close"].to_numpy(), close)
    np.testing.assert_array_equal(read_npz_entry(path)[0]["close"].to_numpy(), close)


def test_a_corrupt_cache_file_is_reported_and_fetched_again(
    load, mt5sim, sim_market, cache_dir, mt5_server, caplog
):
    t, close = truth(sim_market, 3000, 3100)
    window = (stamp(t[0]), stamp(t[-1] + 3600))
    load(*window)
    path = entry_path(cache_dir, mt5_server)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a truncated file, as a disk-full copy would leave
    before = calls(mt5sim).get("copy_rates_range", 0)
    with caplog.at_level(logging.WARNING, logger="datafeeds.cache"):
        df = load(*window)
    assert any(
        str(path) in r.getMessage() and "fetching the bars again" in r.getMessage() for r in caplog.records
    )
    assert calls(mt5sim)["copy_rates_range"] > before
    np.testing.assert_array_equal(df["close"].to_numpy(), close)
    assert len(read_npz_entry(path)[0]) == len(t)  # a good file again


def test_the_key_separates_clocks_servers_and_timeframes(load, mt5sim, sim_market, cache_dir, mt5_server):
    t, _ = truth(sim_market, 500, 600)
    window = (stamp(t[0]), stamp(t[-1] + 3600))
    load(*window)
    load(*window, clock="UTC+2")
    load(*window, timeframe="H4")
    load(*window, server="Simulated-Demo")
    found = sorted(str(p.relative_to(cache_dir / "candles")) for p in cache_dir.rglob("*.npz"))
    host, port = mt5_server
    assert found == sorted(
        [
            f"mt5/{host}_{port}/EURUSD/H1@UTC+2-us.npz",
            f"mt5/{host}_{port}/EURUSD/H1@UTC+2.npz",
            f"mt5/{host}_{port}/EURUSD/H4@UTC+2-us.npz",
            "mt5/Simulated-Demo/EURUSD/H1@UTC+2-us.npz",
        ]
    )
    entries = {(e.feed, e.timeframe, e.clock): e for e in CandleStore().entries("mt5")}
    assert entries[(f"{host}:{port}", "H1", "UTC+2-us")].bars == len(t)
    assert read_npz_entry(entry_path(cache_dir, mt5_server))[1]["server"] == "Simulated-Demo"


def test_bars_of_another_trade_server_are_not_mixed_in(
    load, mt5sim, sim_market, cache_dir, mt5_server, caplog
):
    t, close = truth(sim_market, 700, 900)
    load(stamp(t[0]), stamp(t[100]))
    path = entry_path(cache_dir, mt5_server)
    df, header = read_npz_entry(path)
    df.iloc[3, df.columns.get_loc("close")] = inside(df, 3)
    write_npz(path, df, {**{k: header[k] for k in ("source", "feed", "coverage")}, "server": "Other-Broker"})
    with caplog.at_level(logging.WARNING, logger="datafeeds.cache"):
        out = load(stamp(t[0]), stamp(t[-1] + 3600))
    assert any("Other-Broker" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(out["close"].to_numpy(), close)  # the other broker's bar is gone
    assert read_npz_entry(path)[1]["server"] == "Simulated-Demo"


def test_an_empty_answer_is_never_cached_as_coverage(load, mt5sim, sim_market):
    saturday = (pd.Timestamp("2023-03-04 00:00", tz="UTC"), pd.Timestamp("2023-03-05 00:00", tz="UTC"))
    with pytest.raises(NoBarsError, match="no EURUSD H1 bars"):
        load(*saturday)
    before = calls(mt5sim).get("copy_rates_range", 0)
    with pytest.raises(NoBarsError):
        load(*saturday)
    assert calls(mt5sim)["copy_rates_range"] > before  # the terminal is asked again


def test_a_not_found_answer_while_the_terminal_downloads_is_not_cached(load, mt5sim, sim_market):
    t, close = truth(sim_market, 2000, 2100)
    window = (stamp(t[0]), stamp(t[-1] + 3600))
    mt5sim.configure(fail=(("copy_rates_range", 1, -1),))  # None + "Terminal: Call failed", once
    with pytest.raises(NoBarsError):
        load(*window)
    df = load(*window)  # the terminal has the history now: it is asked, not the empty entry
    np.testing.assert_array_equal(df["close"].to_numpy(), close)
    assert range_calls(mt5sim, lambda: load(*window)) == 0  # and now it is cached


def test_a_not_found_page_inside_a_window_limits_the_coverage(
    load, mt5sim, sim_market, cache_dir, mt5_server
):
    mt5sim.configure(maxbars=50)
    t, close = truth(sim_market, 2000, 2200)
    window = (stamp(t[0]), stamp(t[-1] + 3600))
    mt5sim.configure(fail=(("copy_rates_range", 3, -1),))  # the third page of four is "not found"
    first = load(*window)
    assert len(first) < len(t)  # a hole where the terminal had nothing yet
    coverage = read_npz_entry(entry_path(cache_dir, mt5_server))[1]["coverage"]
    assert coverage[-1][1] <= t[100]  # covered only up to the page that did not answer
    df = load(*window)
    np.testing.assert_array_equal(df["close"].to_numpy(), close)


def test_a_stored_entry_that_fails_validation_is_fetched_again(
    load, mt5sim, sim_market, cache_dir, mt5_server, caplog
):
    t, close = truth(sim_market, 3000, 3100)
    window = (stamp(t[0]), stamp(t[-1] + 3600))
    load(*window)
    path = entry_path(cache_dir, mt5_server)
    df, header = read_npz_entry(path)
    df.iloc[5, df.columns.get_loc("high")] = df["low"].iloc[5] - 0.01  # reads fine, but high < low
    write_npz(path, df, {k: header[k] for k in ("source", "feed", "server", "coverage")})
    with caplog.at_level(logging.WARNING, logger="datafeeds.cache"):
        out = load(*window)
    assert any(
        str(path) in r.getMessage() and "fetching the bars again" in r.getMessage() for r in caplog.records
    )
    np.testing.assert_array_equal(out["close"].to_numpy(), close)
    assert (read_npz_entry(path)[0]["high"] >= read_npz_entry(path)[0]["low"]).all()


def test_cache_off_and_bad_modes(load, mt5sim, sim_market, cache_dir):
    t, close = truth(sim_market, 100, 150)
    df = load(stamp(t[0]), stamp(t[-1] + 3600), cache=False)
    np.testing.assert_array_equal(df["close"].to_numpy(), close)
    assert not cache_dir.exists()
    with pytest.raises(ValueError, match="cache must be True, False or 'refresh'"):
        load(stamp(t[0]), stamp(t[-1] + 3600), cache="sometimes")
    with pytest.raises(ValueError, match="'sample' has no read-through cache"):
        load_candles("sample", cache=True)
    with pytest.raises(ValueError, match="keeps its downloaded archive files itself"):
        load_candles("dukascopy", cache="refresh")
    assert len(load_candles("synthetic", bars=24, cache=False)) == 24
