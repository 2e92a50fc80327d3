"""``TerminalLedger``: the terminal's deals booked into the backtest's ledger, money as the terminal reports
it (profit, commission, fee, swap), on hedging and netting accounts, over the journal's bars."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig
from backtests.replay import broker_figures
from datafeeds.clock import UTC, BrokerClock
from neuronet.live.terminal_ledger import StopChange, TerminalLedger

Deal = namedtuple(
    "Deal",
    "ticket order time time_msc type entry magic position_id reason volume price commission swap profit fee "
    "symbol comment external_id",
)
T0 = pd.Timestamp("2024-03-07 10:00", tz="UTC")
H = 3600
BUY, SELL = 0, 1
IN, OUT, INOUT = 0, 1, 2


def bars(n: int = 8, close: float = 1.1000) -> pd.DataFrame:
    index = pd.date_range(T0, periods=n, freq="h", name="time")
    prices = close + 0.0010 * np.arange(n)
    return pd.DataFrame(
        {
            "open": prices,
            "high": prices + 0.0020,
            "low": prices - 0.0020,
            "close": prices + 0.0005,
            "spread": np.full(n, 10.0),
        },
        index=index,
    )


def deal(
    ticket,
    hour,
    kind,
    entry,
    pid,
    volume,
    price,
    *,
    commission=0.0,
    swap=0.0,
    profit=0.0,
    fee=0.0,
    reason=3,
    comment="nn0a1b2c3d signal",
    minutes=1,
):
    seconds = int(T0.value // 10**9) + int(hour * H) + 60 * minutes
    return Deal(
        ticket,
        ticket + 500,
        seconds,
        seconds * 1000,
        kind,
        entry,
        7,
        pid,
        reason,
        volume,
        price,
        commission,
        swap,
        profit,
        fee,
        "EURUSD",
        comment,
        "",
    )


def ledger(deals, *, first=1, clock=UTC, frame=None) -> TerminalLedger:
    led = TerminalLedger.over(frame if frame is not None else bars(), 1e-5, AccountConfig(), clock)
    led.book(deals, [], first)
    return led


def test_money_is_the_terminals_partial_closes_share_the_entry_commission():
    led = ledger(
        [
            deal(1, 1, BUY, IN, 11, 1.0, 1.1010, commission=-3.5, fee=-0.5),
            deal(2, 3, SELL, OUT, 11, 0.4, 1.1030, commission=-1.4, swap=-2.0, profit=40.0),
            deal(3, 5, SELL, OUT, 11, 0.6, 1.0960, commission=-2.1, swap=-1.0, profit=-30.0, reason=4),
        ]
    )
    trades = led.broker.trades_frame()
    assert list(trades["lots"]) == [0.4, 0.6]
    assert list(trades["commission"]) == pytest.approx([-4.0 * 0.4 - 1.4, -4.0 * 0.6 - 2.1])
    assert list(trades["swap"]) == [-2.0, -1.0] and list(trades["profit"]) == [40.0, -30.0]
    assert list(trades["exit_reason"]) == ["signal", "sl"]
    assert list(trades["entry_bar"]) == [1, 1] and list(trades["exit_bar"]) == [3, 5]
    assert trades["entry_time"].iloc[0] == T0 + pd.Timedelta(hours=1, minutes=1)  # the deal's own time
    total = -4.0 - 1.4 - 2.0 + 40.0 - 2.1 - 1.0 - 30.0
    assert trades["net_profit"].sum() == pytest.approx(total)
    balance, equity, _ = led.broker.curves(0)
    assert (
        balance[0] == 10_000
        and balance[1] == pytest.approx(9_996.0)
        and balance[-1] == pytest.approx(10_000 + total)
    )
    deals = led.broker.deals_frame()
    assert list(deals["commission"]) == [-4.0, -1.4, -2.1] and deals["balance"].iloc[-1] == pytest.approx(
        10_000 + total
    )
    # Bar 1 to 2 the whole lot floats at the bars' bid, as the backtest values it.
    assert equity[2] == pytest.approx(balance[2] + (bars()["close"].iloc[2] - 1.1010) * 100_000)


def test_a_netting_reversal_closes_one_trade_and_opens_the_other():
    led = ledger(
        [
            deal(1, 1, BUY, IN, 21, 1.0, 1.1010, commission=-2.0),
            deal(2, 2, SELL, INOUT, 21, 3.0, 1.1020, commission=-6.0, profit=100.0),
            deal(3, 4, BUY, OUT, 21, 2.0, 1.1050, commission=-4.0, profit=-600.0),
        ]
    )
    trades = led.broker.trades_frame()
    assert list(trades["type"]) == ["buy", "sell"] and list(trades["lots"]) == [1.0, 2.0]
    assert list(trades["commission"]) == pytest.approx([-2.0 - 2.0, -4.0 - 4.0])
    assert list(trades["entry_price"]) == [1.1010, 1.1020]
    assert trades["net_profit"].sum() == pytest.approx(-2 - 6 + 100 - 4 - 600)
    assert list(led.broker.deals_frame()["entry"]) == ["in", "in/out", "out"]


def test_a_netting_position_added_to_has_its_average_price():
    led = ledger(
        [
            deal(1, 1, BUY, IN, 31, 1.0, 1.1000),
            deal(2, 2, BUY, IN, 31, 1.0, 1.1020),
            deal(3, 3, SELL, OUT, 31, 2.0, 1.1030, profit=40.0),
        ]
    )
    trades = led.broker.trades_frame()
    assert len(trades) == 1 and trades["entry_price"].iloc[0] == pytest.approx(1.1010)
    assert trades["lots"].iloc[0] == 2.0 and trades["profit"].iloc[0] == 40.0


def test_a_position_still_open_is_closed_at_the_last_close_by_the_backtests_end_of_test_exit():
    frame = bars()
    led = ledger([deal(1, 2, SELL, IN, 41, 0.5, 1.1020, commission=-1.0)], frame=frame)
    assert led.broker.trades_frame().empty and led.broker.deals == 1
    led.finish(7)
    assert led.held_at_end == 1 and not led.broker.open_positions
    ask = frame["close"].iloc[-1] + 10 * 1e-5
    profit = (1.1020 - ask) * 0.5 * 100_000
    trades = led.broker.trades_frame()
    row = trades.iloc[0]
    assert len(trades) == 1 and row["exit_reason"] == "end of test"
    assert row["exit_price"] == pytest.approx(ask)
    assert row["ticket"] == 41 and row["entry_bar"] == 2 and row["exit_bar"] == 7
    assert row["exit_time"] == frame.index[-1] and row["commission"] == pytest.approx(-1.0)
    assert row["net_profit"] == pytest.approx(profit - 1.0)
    balance, equity, _ = led.broker.curves(0)
    assert balance[-1] == pytest.approx(10_000 - 1.0 + profit) and equity[-1] == pytest.approx(balance[-1])
    # Before the last bar it floats as the backtest's positions do.
    assert equity[6] == pytest.approx(9_999.0 + (1.1020 - frame["close"].iloc[6] - 1e-4) * 0.5 * 100_000)
    assert list(led.broker.deals_frame()["entry"]) == ["in", "out"] and led.broker.orders_frame()[
        "comment"
    ].iloc[-1] == ("end of test")
    stats = broker_figures(led.broker, 1, 7, led.broker.config).stats
    assert stats["total_net_profit"] == pytest.approx(profit - 1.0)


def test_deals_outside_the_bars_are_booked_at_the_nearest_bar_and_foreign_positions_left_out(caplog):
    led = ledger(
        [
            deal(1, 0, BUY, IN, 51, 1.0, 1.1000),  # in a bar before the first forward bar
            deal(
                2, 9, SELL, OUT, 51, 1.0, 1.1100, profit=100.0
            ),  # after the last closed bar (a close at the stop)
            deal(3, 3, SELL, OUT, 99, 1.0, 1.1100, profit=555.0),  # a position opened before the run
        ]
    )
    trades = led.broker.trades_frame()
    assert len(trades) == 1 and trades["entry_bar"].iloc[0] == 1 and trades["exit_bar"].iloc[0] == 7
    assert led.broker.curves(0)[0][-1] == pytest.approx(10_100.0)
    assert "#99" in caplog.text


def test_times_are_read_with_the_broker_clock():
    clock = BrokerClock(2.0, "us")
    utc = int(T0.value // 10**9) + 2 * H
    broker = int(clock.to_broker_seconds(np.array([utc]))[0])
    d = deal(1, 0, BUY, IN, 61, 1.0, 1.1000)._replace(time=broker, time_msc=broker * 1000 + 250)
    led = ledger([d], clock=clock)
    assert led.broker.deals_frame()["time"].iloc[0] == T0 + pd.Timedelta(hours=2, milliseconds=250)
    assert led.broker.deals_frame()["time"].iloc[0] != pd.Timestamp(broker, unit="s", tz="UTC")


def test_the_backtests_figures_come_out_of_it():
    led = ledger(
        [
            deal(1, 1, BUY, IN, 71, 1.0, 1.1010, commission=-3.0),
            deal(2, 4, SELL, OUT, 71, 1.0, 1.1050, commission=-3.0, profit=400.0),
        ]
    )
    curves, stats = broker_figures(led.broker, 1, 7, led.broker.config)[1:3]
    assert stats["total_trades"] == 1 and stats["total_net_profit"] == pytest.approx(394.0)
    assert stats["final_balance"] == pytest.approx(10_394.0) and len(curves) == 8


def test_an_exit_of_a_position_already_closed_is_money_but_no_trade(caplog):
    led = ledger(
        [
            deal(1, 1, BUY, IN, 81, 1.0, 1.1000),
            deal(2, 2, SELL, OUT, 81, 1.0, 1.1010, profit=100.0),
            deal(3, 3, SELL, OUT, 81, 1.0, 1.1020, profit=7.0),
        ]
    )
    led.finish(7)
    assert len(led.broker.trades_frame()) == 1 and led.held_at_end == 0
    assert led.broker.curves(0)[0][-1] == pytest.approx(10_107.0)
    assert "which is not open" in caplog.text


def test_a_change_of_stops_applies_to_the_exits_after_it_and_to_the_end():
    at = int(T0.value) + 3 * H * 10**9  # the EA's call at bar 3's open
    changes = [
        StopChange(at, 91, 1.0950, None),
        StopChange(at, 92, 1.0990, 1.1200),
        StopChange(at + H * 10**9, 92, 1.0995, None),
    ]
    led = TerminalLedger.over(bars(), 1e-5, AccountConfig(hedging=True), UTC)
    led.book(
        [
            deal(1, 1, BUY, IN, 91, 1.0, 1.1000),
            deal(2, 1, BUY, IN, 92, 1.0, 1.1000),
            deal(3, 2, SELL, OUT, 91, 0.5, 1.1010, profit=50.0),  # before the change
            deal(4, 4, SELL, OUT, 91, 0.5, 1.1020, profit=100.0),  # after it
        ],
        [],
        1,
        changes,
    )
    led.finish(7)  # position 92 is closed at the end, with the last levels
    trades = led.broker.trades_frame()
    assert list(trades["ticket"]) == [91, 91, 92]
    assert trades["sl"].isna().iloc[0] and list(trades["sl"].iloc[1:]) == [1.0950, 1.0995]
    assert trades["tp"].isna().all()


def test_the_deals_of_several_symbols_are_booked_in_the_terminals_time_order():
    """Booked a symbol at a time, EURUSD's exit at 14:01 came before USDJPY's at 13:01 and carried a balance
    without USDJPY's profit. One account: each deal's balance is the account's right after it."""
    from backtests.broker.portfolio import open_brokers
    from datafeeds.symbols import BUILTIN

    frame = bars()
    jpy = frame.assign(**{c: frame[c] * 100 for c in ("open", "high", "low", "close")})
    columns = {
        name: (
            *(df[c].to_numpy() for c in ("open", "high", "low", "close", "spread")),
            df.index.as_unit("ns"),
        )
        for name, df in (("EURUSD", frame), ("USDJPY", jpy))
    }
    brokers = open_brokers(columns, {n: BUILTIN[n] for n in columns}, AccountConfig(), UTC)
    ledgers = {name: TerminalLedger(broker, UTC) for name, broker in brokers.items()}
    eur = [deal(1, 1, BUY, IN, 11, 0.1, 1.1010), deal(2, 4, SELL, OUT, 11, 0.1, 1.1040, profit=30.0)]
    jpy_deals = [
        deal(3, 2, BUY, IN, 12, 0.1, 110.20)._replace(symbol="USDJPY"),
        deal(4, 3, SELL, OUT, 12, 0.1, 110.40, profit=18.12)._replace(symbol="USDJPY"),
    ]
    TerminalLedger.book_account(
        {"EURUSD": (ledgers["EURUSD"], eur, []), "USDJPY": (ledgers["USDJPY"], jpy_deals, [])}, 1
    )
    deals = brokers["EURUSD"].deals_frame()
    assert list(deals["deal"]) == [1, 3, 4, 2]
    assert list(deals["symbol"]) == ["EURUSD", "USDJPY", "USDJPY", "EURUSD"]
    assert list(deals["balance"]) == [10_000.0, 10_000.0, 10_018.12, 10_048.12]
    trades = brokers["EURUSD"].ledger.trades
    assert [(t.symbol, t.profit) for t in trades] == [("USDJPY", 18.12), ("EURUSD", 30.0)]
    assert trades[0].rate == pytest.approx(18.12 / (0.2 * 0.1 * 100_000))  # the terminal's own conversion
