"""The terminal source over a real RPyC classic server process serving the simulated terminal."""

from __future__ import annotations

import socket
import time

import numpy as np
import pandas as pd
import pytest

from datafeeds.candles import to_rates
from datafeeds.clock import BrokerClock
from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import (
    NoBarsError,
    NotLoggedInError,
    TerminalConnectionError,
    TerminalError,
    TerminalTimeoutError,
    UnknownSymbolError,
)

BROKER = BrokerClock(2, "us")  # the simulator's server clock: New York + 7 h
H1 = 16385


def source(server, **kw) -> TerminalSource:
    kw.setdefault("timeout", 10.0)
    kw.setdefault("backoff", 0.01)
    return TerminalSource(*server, clock="UTC+2/us", **kw)


def assert_same_bars(df: pd.DataFrame, rates: np.ndarray, utc: np.ndarray) -> None:
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, utc)
    for name in ("open", "high", "low", "close", "tick_volume", "spread", "real_volume"):
        np.testing.assert_array_equal(df[name].to_numpy(), rates[name], err_msg=name)


def test_full_history_is_paged_and_matches_the_known_candles(mt5_server, mt5sim, sim_market):
    rates, utc = sim_market.history("EURUSD", H1)
    with source(mt5_server) as src:
        df = src.load("EURUSD", "H1")
    # Everything but the bar still forming, in UTC, exactly.
    assert_same_bars(df, rates[:-1], utc[:-1])
    assert mt5sim.call_count("copy_rates_from_pos") >= 1 + len(rates) // 1000
    meta = df.attrs["candles"]
    assert (meta.symbol, meta.digits, meta.clock) == ("EURUSD", 5, BROKER)
    assert meta.source == f"mt5:{mt5_server[0]}:{mt5_server[1]}"


def test_range_across_the_us_dst_switch_pages_without_gaps_or_duplicates(mt5_server, mt5sim, sim_market):
    mt5sim.configure(maxbars=100)
    rates, utc = sim_market.history("EURUSD", H1)
    start, end = pd.Timestamp("2023-03-01", tz="UTC"), pd.Timestamp("2023-03-30 12:00", tz="UTC")
    with source(mt5_server) as src:
        df = src.load("EURUSD", H1, start=start.tz_localize(None), end=end)
    want = (utc >= start.value // 10**9) & (utc < end.value // 10**9)  # end is exclusive
    assert utc[want][-1] == end.value // 10**9 - 3600
    assert_same_bars(df, rates[want], utc[want])
    assert mt5sim.call_count("copy_rates_range") > 5  # a month of H1 in pages of 100 bars
    # Broker Monday 2023-03-13 00:00 is UTC+3 after New York's switch on Sunday 12 March (UTC+2 before).
    assert pd.Timestamp("2023-03-12 21:00", tz="UTC") in df.index
    assert pd.Timestamp("2023-03-09 22:00", tz="UTC") in df.index  # broker Friday 10 March 00:00
    # And back: to_rates gives the terminal's own broker seconds.
    np.testing.assert_array_equal(to_rates(df)["time"], rates[want]["time"])


def test_answers_cut_short_by_the_terminal_are_continued(mt5_server, mt5sim, sim_market):
    # Pages asked for are larger than the terminal's cap: each answer stops at 1000 bars and the source goes
    # on from the bar after the last one it got.
    rates, utc = sim_market.history("EURUSD", H1)
    with source(mt5_server, page_size=2500) as src:
        df = src.load("EURUSD", "H1", start="2023-01-01")
    assert_same_bars(df, rates[:-1], utc[:-1])
    assert mt5sim.call_count("copy_rates_range") >= len(rates) // 1000


def test_other_timeframes_and_digits(mt5_server, mt5sim, sim_market):
    rates, utc = sim_market.history("USDJPY", 16408)
    with source(mt5_server) as src:
        df = src.load("USDJPY", "D1", start="2023-06-01")
    want = utc >= pd.Timestamp("2023-06-01", tz="UTC").value // 10**9
    assert_same_bars(df, rates[want][:-1], utc[want][:-1])
    assert df.attrs["candles"].digits == 3


def test_unknown_symbol_names_close_matches_and_is_not_retried(mt5_server, mt5sim):
    with source(mt5_server, retries=3) as src, pytest.raises(UnknownSymbolError, match="did you mean EURUSD"):
        src.load("EURUSDm", "H1")
    assert mt5sim.call_count("symbol_info") == 1


def test_not_logged_in(mt5_server, mt5sim):
    mt5sim.configure(logged_in=False)
    with source(mt5_server) as src, pytest.raises(NotLoggedInError, match="Login to Trade Account"):
        src.load("EURUSD", "H1")


def test_initialize_failure_says_what_to_check_and_is_not_retried(mt5_server, mt5sim):
    mt5sim.configure(init_error=-10003)
    with source(mt5_server, retries=3) as src, pytest.raises(TerminalError, match=r"-10003.*path=") as info:
        src.load("EURUSD", "H1")
    assert not isinstance(info.value, TerminalTimeoutError)
    assert mt5sim.call_count("initialize") == 1


def test_no_ipc_connection(mt5_server, mt5sim):
    mt5sim.configure(fail=(("account_info", 1, -10004),))
    with source(mt5_server, retries=0) as src, pytest.raises(TerminalError, match="no IPC connection"):
        src.load("EURUSD", "H1")


def test_no_ipc_connection_reconnects_and_retries(mt5_server, mt5sim, sim_market):
    mt5sim.configure(fail=(("copy_rates_range", 1, -10004),))
    rates, utc = sim_market.history("EURUSD", H1)
    with source(mt5_server) as src:
        df = src.load("EURUSD", "H1", start="2023-01-01")
    assert_same_bars(df, rates[:-1], utc[:-1])
    assert mt5sim.call_count("initialize") == 2


def test_two_clients_of_one_bridge_do_not_end_each_others_session(mt5_server, mt5sim, sim_market):
    import rpyc

    rates, utc = sim_market.history("EURUSD", H1)
    window = {"start": "2023-06-01", "end": "2023-06-03"}
    a, b = source(mt5_server, retries=1), source(mt5_server, retries=1)
    a.load("EURUSD", "H1", **window)
    b.load("EURUSD", "H1", **window)
    a.close()  # must not shut down the terminal session b uses
    assert mt5sim.call_count("shutdown") == 0
    assert len(b.load("EURUSD", "H1", **window)) == 45
    other = rpyc.classic.connect(*mt5_server)  # a third client that does call shutdown()
    other.modules.MetaTrader5.shutdown()
    other.close()
    df = b.load("EURUSD", "H1", start="2023-01-01")  # -10004, then a fresh initialize() and a retry
    b.close()
    assert_same_bars(df, rates[:-1], utc[:-1])


def test_ipc_timeout_is_retried_and_the_data_is_complete(mt5_server, mt5sim, sim_market):
    mt5sim.configure(fail=(("copy_rates_range", 2, -10005), ("copy_rates_range", 3, -10005)))
    rates, utc = sim_market.history("EURUSD", H1)
    with source(mt5_server, retries=2) as src:
        df = src.load("EURUSD", "H1", start="2023-01-01")
    assert_same_bars(df, rates[:-1], utc[:-1])


def test_ipc_timeout_after_the_last_retry_raises(mt5_server, mt5sim):
    mt5sim.configure(fail=(("copy_rates_range", 1, -10005), ("copy_rates_range", 2, -10005)))
    with source(mt5_server, retries=1) as src, pytest.raises(TerminalTimeoutError, match="-10005") as info:
        src.load("EURUSD", "H1", start="2023-01-01")
    assert info.value.code == -10005
    assert mt5sim.call_count("copy_rates_range") == 2


def test_a_dropped_connection_reconnects_and_retries(mt5_server, mt5sim, sim_market):
    mt5sim.configure(fail=(("copy_rates_range", 1, 0),))  # 0: the call raises ConnectionResetError
    rates, utc = sim_market.history("EURUSD", H1)
    with source(mt5_server) as src:
        df = src.load("EURUSD", "H1", start="2023-06-01", end="2023-06-30")
    want = (utc >= pd.Timestamp("2023-06-01", tz="UTC").value // 10**9) & (
        utc < pd.Timestamp("2023-06-30", tz="UTC").value // 10**9
    )
    assert_same_bars(df, rates[want], utc[want])
    assert mt5sim.call_count("initialize") == 2  # a fresh session after the drop


def test_a_stalled_terminal_times_out_within_the_bound(mt5_server, mt5sim):
    mt5sim.configure(delay=(("copy_rates_range", 30.0),))
    t0 = time.monotonic()
    with source(mt5_server, timeout=1.0) as src, pytest.raises(TerminalTimeoutError, match="within 1 s"):
        src.load("EURUSD", "H1", start="2023-01-01")
    assert time.monotonic() - t0 < 5.0


def test_empty_range(mt5_server, mt5sim):
    with source(mt5_server) as src, pytest.raises(NoBarsError, match="no EURUSD H1 bars"):
        src.load("EURUSD", "H1", start="2023-01-07", end="2023-01-07 20:00")  # broker Saturday


def test_connection_refused_says_how_to_start_the_bridge():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        t0 = time.monotonic()
        with pytest.raises(TerminalConnectionError) as info:
            TerminalSource("127.0.0.1", port).load("EURUSD", "H1")
    message = str(info.value)
    assert "connection refused" in message and "rpyc_classic" in message and "major version" in message
    assert time.monotonic() - t0 < 5.0


def test_bad_arguments_fail_before_any_connection():
    with pytest.raises(ValueError, match="port"):
        TerminalSource("127.0.0.1", 70000)
    with pytest.raises(ValueError, match="before end"):
        TerminalSource("127.0.0.1", 1).load("EURUSD", "H1", start="2023-02-01", end="2023-01-01")
    with pytest.raises(ValueError, match="timeframe"):
        TerminalSource("127.0.0.1", 1).load("EURUSD", "H7")


def test_through_the_registry_the_frame_validates_without_unexpected_gaps(mt5_server, mt5sim):
    from datafeeds.sources import load_validated

    host, port = mt5_server
    report = load_validated(
        "mt5", "EURUSD", "H1", "2023-03-01", "2023-04-01", host=host, port=port, clock=BrokerClock(2, "us")
    )
    assert len(report.frame) > 500
    assert report.unexpected_gaps == [] and len(report.expected_gaps) == 4  # four weekends, DST included
