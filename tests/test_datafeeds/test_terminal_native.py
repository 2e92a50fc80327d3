"""The terminal source through an in-process ``MetaTrader5`` module: the code path of the Windows package,
exercised with the simulator imported under that name. Also the value-only wire format of the bridge."""

from __future__ import annotations

import time
from collections import namedtuple

import numpy as np
import pytest

from datafeeds.clock import BrokerClock
from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import NotLoggedInError, TerminalTimeoutError
from datafeeds.terminal_link import flatten, unflatten

H1 = 16385


def test_native_package_is_used_when_importable(native_mt5, sim_market):
    rates, utc = sim_market.history("GBPUSD", H1)
    with TerminalSource(clock=BrokerClock(2, "us")) as src:
        df = src.load("GBPUSD", "H1")
        assert src.where == "local"
    np.testing.assert_array_equal(df.index.as_unit("s").asi8, utc[:-1])
    np.testing.assert_array_equal(df["close"].to_numpy(), rates["close"][:-1])
    assert native_mt5.call_count("copy_rates_from_pos") > 1  # paged: maxbars is 1000
    assert df.attrs["candles"].source == "mt5:local"


def test_native_not_logged_in(native_mt5):
    native_mt5.configure(logged_in=False)
    with TerminalSource() as src, pytest.raises(NotLoggedInError):
        src.load("EURUSD", "H1")


def test_native_stall_times_out_and_the_package_is_not_reentered(native_mt5):
    native_mt5.configure(delay=(("copy_rates_range", 1.5),))
    t0 = time.monotonic()
    src = TerminalSource(timeout=0.3, retries=0)
    with pytest.raises(TerminalTimeoutError, match=r"within 0\.3 s"):
        src.load("EURUSD", "H1", start="2023-01-01")
    assert time.monotonic() - t0 < 1.2
    # The stalled call still runs: a new call waits for it instead of entering the package.
    with pytest.raises(TerminalTimeoutError, match="earlier MetaTrader 5 call has not returned"):
        src.load("EURUSD", "H1", start="2023-01-01")
    native_mt5.configure(delay=(("copy_rates_range", 0.0),))
    time.sleep(1.5)
    assert native_mt5.call_count("copy_rates_range") == 1  # counted once the stalled call got through
    assert len(TerminalSource(timeout=5).load("EURUSD", "H1", start="2023-12-01")) > 100


def test_wire_format_carries_values_only():
    Info = namedtuple("SymbolInfo", "name digits point visible")
    arr = np.zeros(3, dtype=[("time", "<i8"), ("bid", "<f8"), ("flags", "<u4")])
    arr["time"] = [1, 2, 3]
    arr["bid"] = [1.5, 2.5, 3.5]
    answer = (Info("EURUSD", np.int64(5), np.float64(1e-5), True), arr, None, {"k": [1, "a"]})
    flat = flatten(answer)

    def builtin_only(node):
        if isinstance(node, tuple):
            return all(builtin_only(x) for x in node)
        return type(node) in (str, int, float, bool, bytes, type(None))

    assert builtin_only(flat)
    info, back, none, mapping = unflatten(flat)
    assert info == ("EURUSD", 5, 1e-5, True) and info.digits == 5 and info._asdict()["name"] == "EURUSD"
    assert type(info.digits) is int
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back, arr)
    assert none is None and mapping == {"k": (1, "a")}


def test_stitch_orders_pages_and_keeps_each_bar_once():
    from datafeeds.candles import RATES_DTYPE
    from datafeeds.terminal import _stitch

    bars = np.zeros(20, dtype=RATES_DTYPE)
    bars["time"] = np.arange(20) * 60
    bars["close"] = np.arange(20)
    newer = bars[9:].copy()
    newer["close"][0] = 99  # bar 9 again, as a later page saw it
    out = _stitch([bars[:10], newer])  # the later page's copy of a bar wins
    np.testing.assert_array_equal(out["time"], bars["time"])
    assert out["close"][9] == 99 and out["close"][10] == 10
    np.testing.assert_array_equal(_stitch([bars[10:], bars[:10]]), bars)  # out of order: sorted


def test_native_sources_share_the_session_and_the_last_one_ends_it(native_mt5):
    import gc

    gc.collect()  # sources other tests left open no longer hold the session
    window = {"start": "2023-06-01", "end": "2023-06-03"}
    a, b = TerminalSource(retries=0), TerminalSource(retries=0)
    a.load("EURUSD", "H1", **window)
    b.load("EURUSD", "H1", **window)
    a.close()
    assert native_mt5.call_count("shutdown") == 0 and native_mt5.initialized
    assert len(b.load("EURUSD", "H1", **window)) == 45
    b.close()
    assert native_mt5.call_count("shutdown") == 1 and not native_mt5.initialized


@pytest.mark.parametrize(
    ("flat", "error"),
    [
        (("a", (("", "|O"),), 2, b"\0" * 16), None),  # an object array: pointers, not values
        (("a", (("time", "<i8"),), 3, b"\0" * 8), None),  # fewer bytes than records
        (("zz", 1), None),  # an unknown tag
        (("v", None), ("not a code", "x")),  # a malformed last_error
        (("v", None), (1,)),
    ],
    ids=["object array", "short bytes", "unknown tag", "error text", "error length"],
)
def test_answers_neuronet_cannot_read_are_terminal_errors(flat, error):
    from datafeeds.terminal_errors import TerminalError
    from datafeeds.terminal_link import read_answer

    with pytest.raises(TerminalError, match=r"sent an answer neuronet cannot read|sent \d+ bytes"):
        read_answer(flat, error, "127.0.0.1:1", "copy_rates_range")


def test_a_deeply_nested_answer_is_a_terminal_error():
    from datafeeds.terminal_errors import TerminalError
    from datafeeds.terminal_link import read_answer

    flat = ("v", 1)
    for _ in range(100_000):
        flat = ("t", (flat,))
    with pytest.raises(TerminalError, match="cannot read"):
        read_answer(flat, None, "here", "account_info")
