"""Paper trading: the backtest broker over a growing history gives the backtest broker's trades."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests.broker import AccountConfig, Broker
from backtests.broker.terms import SymbolTerms
from datafeeds import load_candles, make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import LiveError
from neuronet.live.paper import PaperBroker

HIST = 50


@pytest.fixture(scope="module")
def candles():
    return load_candles("sample").iloc[:400]


def _script(t: int) -> tuple | None:
    """A fixed set of requests: market orders with stops, a pending order, a partial close."""
    return {
        52: ("order", +1, 1.0, None, None, 7, "a"),
        60: ("order", -1, 2.0, None, None, 7, "b"),
        75: ("pending", "buy_limit", 0.5, -0.002, None, None, None, None, 7, "c"),
        90: ("order", +1, 1.0, 0.003, 0.004, 7, "d"),
        120: ("close", None, 7, None, "signal"),
        130: ("order", -1, 0.3, 0.005, 0.004, 7, "e"),
        140: ("order", +1, 0.2, 0.001, 0.001, 7, "f"),
    }.get(t)


def _apply(broker, t: int) -> None:
    step = _script(t)
    if step is None:
        return
    name, *args = step
    if name == "pending":  # prices relative to the open: resolved here
        args[2] = broker.opens[t] + args[2]
    if name == "order" and args[2] is not None:
        side, price = args[0], broker.opens[t]  # stops as distances from the open
        args[2], args[3] = price - side * args[2], price + side * args[3]
    getattr(broker, name)(*args)


def test_paper_broker_fills_as_the_backtest_broker(candles):
    cfg = AccountConfig(spread=12, commission=3.0, hedging=True)
    df, point = candles, 1e-5
    full = Broker(
        *(df[c].to_numpy() for c in ("open", "high", "low", "close", "spread")), df.index, point, cfg,
        terms=SymbolTerms(df.attrs["candles"].symbol),  # the records name the symbol, as the paper broker's
    )  # fmt: skip
    paper = PaperBroker(df.iloc[:HIST], point, cfg)
    for t in range(HIST, len(df)):
        full.bar_open(t)
        row = df.iloc[t]
        assert paper.open_bar(df.index[t], row["open"], row["open"] + 12 * point) == t
        _apply(full, t)
        _apply(paper, t)
        full.bar_range(t)
        paper.close_bar(t, row["high"], row["low"], row["close"])
    last = len(df) - 1
    full.finish(last)
    paper.finish(last)
    a, b = full.trades_frame(), paper.trades_frame()
    assert len(a) >= 5 and not full.rejected
    reasons = set(a["exit_reason"])
    assert "signal" in reasons and reasons & {"sl", "tp"}
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(full.deals_frame(), paper.deals_frame())
    for x, y in zip(full.curves(HIST), paper.curves(HIST), strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_missed_bar_opens_at_its_own_open_and_spread(candles):
    paper = PaperBroker(candles.iloc[:HIST], 1e-5, AccountConfig())
    row = candles.iloc[HIST]
    t = paper.add_bar(candles.index[HIST], row["open"], 7)
    assert paper.price(+1) == pytest.approx(row["open"] + 7e-5) and paper.price(-1) == row["open"]
    paper.set_tick(row["open"] + 1e-4, row["open"] + 2e-4)  # a quote inside the bar: on_tick fills there
    assert paper.price(+1) == pytest.approx(row["open"] + 2e-4)
    paper.close_bar(t, row["high"], row["low"], row["close"])
    paper.open_bar(candles.index[HIST + 1], 1.1, 1.1001)
    assert paper.price(-1) == 1.1  # a new bar forgets the tick


@pytest.mark.parametrize(
    ("bid", "ask", "message"),
    [
        (float("nan"), 1.1, "bid nan"),
        (1.1, 1.0, "ask 1.0 cannot"),
        (0.0, 0.1, "bid 0.0"),
        (1.1, float("inf"), "ask inf"),
    ],
)
def test_quotes_that_cannot_be_traded_on_are_refused(candles, bid, ask, message):
    paper = PaperBroker(candles.iloc[:HIST], 1e-5, AccountConfig())
    with pytest.raises(LiveError, match=message):
        paper.open_bar(candles.index[HIST], bid, ask)


def test_bars_out_of_order_are_refused(candles):
    paper = PaperBroker(candles.iloc[:HIST], 1e-5, AccountConfig())
    with pytest.raises(LiveError, match="does not follow"):
        paper.open_bar(candles.index[HIST - 1], 1.1, 1.1001)
    t = paper.open_bar(candles.index[HIST], 1.1, 1.1001)
    with pytest.raises(LiveError, match="is not the bar forming"):
        paper.close_bar(t - 1, 1.2, 1.0, 1.1)
    with pytest.raises(LiveError, match="at least one closed bar"):
        PaperBroker(candles.iloc[:0], 1e-5, AccountConfig())


def test_the_history_grows_past_its_first_capacity(candles):
    paper = PaperBroker(candles.iloc[:2], 1e-5, AccountConfig())
    for t in range(2, 300):
        row = candles.iloc[t]
        paper.open_bar(candles.index[t], row["open"], row["open"] + 1e-4)
        paper.close_bar(t, row["high"], row["low"], row["close"])
    np.testing.assert_array_equal(paper.closes, candles["close"].to_numpy()[:300])
    assert paper.time.equals(candles.index[:300])


def test_a_paper_order_for_today_ends_at_the_servers_midnight(candles):
    """Paper trading reads the server clock from its bars, as the terminal does for ORDER_TIME_DAY: a UTC+2
    server's day ends at 22:00 UTC."""
    from dataclasses import replace

    from datafeeds import BrokerClock

    history = candles.iloc[:HIST].copy()
    history.attrs = {"candles": replace(candles.attrs["candles"], clock=BrokerClock(2))}
    paper = PaperBroker(history, 1e-5, AccountConfig())
    when = pd.Timestamp("2017-05-01 21:00", tz="UTC")
    row = candles.iloc[HIST]
    paper.open_bar(when, row["open"], row["open"] + 1e-4)
    ticket = paper.pending("buy_limit", 0.1, row["open"] - 0.001, None, None, None, "today", 0, "")
    assert ticket is not None
    assert paper.orders()[0].expiration == pd.Timestamp("2017-05-01 22:00", tz="UTC")


def test_a_paper_positions_swap_stays_on_it_until_its_closing_deal_books_it():
    """Paper money is the backtest's: 1 lot of EURUSD bought on Monday at 1.10000 (flat, no spread) at
    -10 points a night accrues -20.00 by Wednesday noon, in the equity (9,980.00) and not the balance
    (10,000.00); the deal closing it on Thursday at noon books its -30.00 (balance 9,970.00)."""
    hours = pd.date_range("2024-01-08", periods=10, freq="h", tz="UTC")  # Monday 00:00 to 09:00
    flat = np.full(len(hours), 1.1)
    meta = CandleMeta("EURUSD", Timeframe.H1, 5, UTC, "test")
    history = make_frame({"open": flat, "high": flat, "low": flat, "close": flat}, hours, meta)
    config = AccountConfig(spread=0, swap_long=-10.0, triple_swap_weekday=4)
    paper = PaperBroker(history, 1e-5, config)
    seen = {}
    for when in pd.date_range(hours[-1] + pd.Timedelta(hours=1), "2024-01-11 12:00+00:00", freq="h"):
        t = paper.open_bar(when, 1.1, 1.1)
        if when == pd.Timestamp("2024-01-08 10:00", tz="UTC"):
            ticket = paper.order(+1, 1.0, None, None, 7, "")
        elif when == pd.Timestamp("2024-01-10 12:00", tz="UTC"):
            seen["wednesday"] = paper.account()
        elif when == pd.Timestamp("2024-01-11 12:00", tz="UTC"):
            paper.close(ticket, 7)
        paper.close_bar(t, 1.1, 1.1, 1.1)
    wednesday = seen["wednesday"]
    assert (wednesday.balance, wednesday.equity) == (10_000.0, pytest.approx(9_980.0, abs=1e-9))
    deals = paper.deals_frame()
    assert deals["swap"].tolist() == [0.0, -30.0]
    assert deals["balance"].tolist() == [10_000.0, 9_970.0]
