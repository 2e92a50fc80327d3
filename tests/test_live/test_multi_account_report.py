"""``neuronet live report`` of a multi-symbol live account: the journal's bars of every symbol and the
terminal's deals of every symbol the run traded, booked into one account in the account currency as the
terminal booked them (USDJPY's yen profit converted by the terminal, never again by the report)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from test_live.live_support import OPEN_SOURCES
from test_live.multi_eas import STOP, EachOnce, StopMidway
from test_live.test_account_report import _edit_account, _send
from test_live.test_cli_live import neuronet
from test_live.test_multi_live import ROOMY, live_runner

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.report import journal_result
from neuronet.live.runner import LiveSettings

LOTS, CONTRACT = 0.1, 100_000.0


class Pair(EachOnce):
    """Buys 0.1 lots of EURUSD and of USDJPY once each: a dollar-quoted and a yen-quoted symbol."""

    symbols = ("EURUSD", "USDJPY")


def source(port: int) -> TerminalSource:
    src = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(src)
    return src


def run_live(port, sim, journal, ea=EachOnce, *, bars: int, close_on_exit: bool = False, **kw):
    run = live_runner(port, sim, journal, ea=ea, bars=bars, **kw)
    run.s = dataclasses.replace(run.s, close_on_exit=close_on_exit)
    run.run()


def terminal_deals(sim) -> list:
    return list(sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ())


def usd_profit(symbol: str, entry: float, exit_: float) -> float:
    """MetaTrader's profit of a 0.1-lot long, by hand: the price move times the contract, in the profit
    currency; yen turned into dollars at the USDJPY price of the close (the account is in USD)."""
    move = (exit_ - entry) * CONTRACT * LOTS
    return round(move / exit_ if symbol.endswith("JPY") else move, 2)


def test_the_report_of_a_multi_symbol_live_account_books_the_terminals_money(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, bars=4, close_on_exit=True)
    deals = terminal_deals(sim)
    assert len(deals) == 6  # one entry and one exit per symbol
    got = journal_result(journal, source(port))
    assert got.data["model"] == "live account" and got.data["open_positions"] == 0
    assert got.data["magic"] == [EachOnce.magic]
    trades = got.trades.set_index("symbol")
    assert sorted(trades.index) == ["EURUSD", "GBPUSD", "USDJPY"]
    booked = {}
    for symbol in EachOnce.symbols:
        entry, exit_ = (next(d for d in deals if d.symbol == symbol and d.entry == e) for e in (0, 1))
        want = usd_profit(symbol, entry.price, exit_.price)
        assert exit_.profit == want  # the terminal booked MetaTrader's figure
        row = trades.loc[symbol]
        assert (row["entry_price"], row["exit_price"]) == (entry.price, exit_.price)
        assert row["profit"] == want and row["net_profit"] == want  # no costs on this terminal
        assert got.data["symbols"][symbol]["net_profit"] == pytest.approx(want, abs=1e-9)
        assert got.data["symbols"][symbol]["trades"] == 1 and got.data["symbols"][symbol]["lacked_bars"] == 0
        booked[symbol] = want
    jpy = trades.loc["USDJPY"]
    assert jpy["profit"] != pytest.approx(
        (jpy["exit_price"] - jpy["entry_price"]) * CONTRACT * LOTS
    )  # not yen
    total = round(sum(booked.values()), 2)
    assert got.stats["total_net_profit"] == pytest.approx(total, abs=1e-9)
    assert got.stats["initial_deposit"] == 10_000.0
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + total, abs=1e-9)
    assert got.balance[-1] == pytest.approx(10_000.0 + total, abs=1e-9)
    # Each deal carries the account's balance after it, in the terminal's order across the symbols.
    exits = got.deals[got.deals["entry"] == "out"]
    running = 10_000.0 + np.cumsum([booked[s] for s in exits["symbol"]])
    np.testing.assert_allclose(exits["balance"], running, atol=1e-9)
    assert set(got.orders["symbol"]) == set(EachOnce.symbols) and set(got.orders["state"]) == {"filled"}
    assert set(got.symbol_charts) == set(EachOnce.symbols)


def test_only_the_runs_symbols_and_magic_numbers_are_its_money(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, ea=Pair, bars=4, close_on_exit=True)
    before = journal_result(journal, source(port))
    sim.market.set_now("2024-03-07 12:30")  # inside the run's span (the bar forming at its stop)
    _send(sim, "EURUSD", 777)  # another EA on one of the run's symbols
    _send(sim, "GBPUSD", Pair.magic)  # the run's magic number on a symbol it does not trade
    after = journal_result(journal, source(port))
    pd.testing.assert_frame_equal(after.trades, before.trades)
    pd.testing.assert_frame_equal(after.deals, before.deals)
    assert sorted(after.trades["symbol"]) == ["EURUSD", "USDJPY"]
    assert set(after.data["symbols"]) == {"EURUSD", "USDJPY"}


def test_positions_still_held_are_closed_at_the_last_close_in_the_report_only(port, sim, tmp_path):
    """The report closes them by the backtest's "end of test" exit at the last bar's bid; a yen gain is
    turned into dollars at the dealer's side, the ask (a loss at the bid), never at the better price."""
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, ea=Pair, bars=3)
    got = journal_result(journal, source(port))
    assert {p["symbol"] for p in sim.state.book.positions.values()} == {"EURUSD", "USDJPY"}  # untouched
    assert got.data["open_positions"] == 2
    last = [r for r in read_journal(journal) if r["type"] == "bar"][-1]
    trades = got.trades.set_index("symbol")
    for symbol, point in (("EURUSD", 1e-5), ("USDJPY", 1e-3)):
        row, close = trades.loc[symbol], last["bars"][symbol]["close"]
        ask = close + last["feeds"][f"{symbol} H1"]["spread"][-1] * point
        move = (close - row["entry_price"]) * CONTRACT * LOTS
        want = move if symbol == "EURUSD" else move / (ask if move > 0 else close)
        assert row["exit_reason"] == "end of test" and row["exit_price"] == close
        assert row["profit"] == pytest.approx(round(want, 2), abs=1e-9)


def test_the_live_report_has_the_paper_runs_trades(port, sim, tmp_path):
    live = tmp_path / "live.jsonl"
    run_live(port, sim, live, bars=4)
    got = journal_result(live, source(port))
    sim.state.reset()
    sim.market.set_now("2024-03-07 10:00")
    paper = tmp_path / "paper.jsonl"
    settings = LiveSettings("EURUSD", Timeframe.H1, paper, history_bars=100, max_bars=4)
    MultiLiveRunner(EachOnce, {}, source(port), settings, sleep=sim.sleep, status=lambda _: None).run()
    want = journal_result(paper)
    same = ["symbol", "type", "lots", "entry_time", "entry_price", "exit_time", "exit_price", "exit_reason",
            "profit", "net_profit", "entry_bar", "exit_bar"]  # fmt: skip
    pd.testing.assert_frame_equal(got.trades[same], want.trades[same])
    np.testing.assert_allclose(got.balance, want.balance, atol=1e-6)
    np.testing.assert_allclose(got.equity["equity"], want.equity["equity"], atol=1e-6)
    for key in ("equity_drawdown_maximal", "equity_drawdown_absolute", "balance_drawdown_maximal"):
        assert got.stats[key] == pytest.approx(want.stats[key], abs=1e-6), key
    assert 0 < want.stats["equity_drawdown_maximal"] < 100  # the paper report's path is the account's too


def test_a_journal_cut_in_the_middle_of_a_bar_is_reported_to_its_last_closed_bar(port, sim, tmp_path):
    """Ctrl-C right after the first symbol's order of a bar: the journal ends inside that bar; the order
    the terminal executed then is the run's (held, closed in the report only), the bars end at the last
    one closed."""
    journal = tmp_path / "live.jsonl"
    STOP["midway"] = False
    with pytest.raises(KeyboardInterrupt):
        run_live(port, sim, journal, ea=StopMidway, bars=3, per_symbol=ROOMY)
    run_live(port, sim, journal, ea=StopMidway, bars=1, per_symbol=ROOMY)  # the bar cut short, finished
    STOP["midway"] = False
    with pytest.raises(KeyboardInterrupt):
        run_live(port, sim, journal, ea=StopMidway, bars=3, per_symbol=ROOMY)
    assert read_journal(journal)[-1]["type"] == "stop"
    got = journal_result(journal, source(port))
    assert sorted(got.trades["symbol"]) == ["EURUSD", "EURUSD", "GBPUSD", "USDJPY"]
    assert got.data["open_positions"] == 4 and set(got.trades["exit_reason"]) == {"end of test"}
    assert len(got.balance) == 1  # the one closed live bar


def test_a_multi_symbol_reports_equity_drawdown_is_the_accounts_not_the_main_symbols(port, sim, tmp_path):
    """The equity path of a multi-symbol journal priced USDJPY's positions at EURUSD's points (millions of
    dollars of drawdown on a 10,000 account). By hand: 0.1 lots each of EURUSD, GBPUSD and USDJPY held over
    bars of known prices: the lowest equity is at most the lowest of the bars' own four prices, each symbol
    at its own price, and never below the deposit less the three positions' worst moves."""
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, bars=4, close_on_exit=True)
    got = journal_result(journal, source(port))
    deals = {d.symbol: d for d in terminal_deals(sim) if d.entry == 0}
    bars = [r for r in read_journal(journal) if r["type"] == "bar"]
    worst = 0.0  # the sum of each symbol's worst bar low against its entry, in dollars
    for symbol, d in deals.items():
        low = min(b["bars"][symbol]["low"] for b in bars)
        move = (low - d.price) * CONTRACT * LOTS
        worst += move / low if symbol.endswith("JPY") else move
    absolute = got.stats["equity_drawdown_absolute"]
    assert 0 < absolute <= -worst + 0.01
    assert got.stats["equity_drawdown_maximal"] < 100  # tens of dollars on 0.3 lots, not millions


def test_a_lost_reply_that_executed_is_a_trade_and_not_a_rejection(port, sim, tmp_path):
    """GBPUSD's order executes and its reply is lost: the run looks it up (never sends it again); the
    report has its trade, from the terminal's deals, and does not list it as rejected."""
    sim.state.book.configure(lost_replies=(1, -10005))
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, bars=4, close_on_exit=True)
    notes = [r["terminal"] for r in read_journal(journal) if r.get("source") == "terminal"]
    assert any(n["event"] == "recovered" for n in notes)
    got = journal_result(journal, source(port))
    assert sorted(got.trades["symbol"]) == ["EURUSD", "GBPUSD", "USDJPY"]
    assert got.rejected == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"login": 1}, r"written on account 1 .*log it in to that account for the report"),
        ({"balance": 0.0}, "the account at the start cannot be scored on"),
        ({"magic": "x"}, r"line \d+: the account record cannot be read"),
    ],
)
def test_a_journal_of_another_account_or_a_damaged_account_record_is_refused(
    port, sim, tmp_path, fields, message
):
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, bars=2)
    _edit_account(journal, **fields)
    with pytest.raises(JournalError, match=message):
        journal_result(journal, source(port))


def test_a_journal_whose_last_record_was_cut_by_a_crash_is_still_reported(port, sim, tmp_path):
    """A crash while writing leaves half a record at the end: the report reads the whole ones."""
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, bars=3, close_on_exit=True)
    whole = journal_result(journal, source(port))
    text = journal.read_bytes()
    journal.write_bytes(text + b'{"type":"tick","bar":1')
    cut = journal_result(journal, source(port))
    pd.testing.assert_frame_equal(cut.trades, whole.trades)
    assert cut.stats["total_net_profit"] == whole.stats["total_net_profit"]


def test_the_command_line_writes_the_multi_symbol_live_accounts_report(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, bars=3, close_on_exit=True)
    money = round(sum(float(d.profit) for d in terminal_deals(sim)), 2)
    out = tmp_path / "rep"
    res = neuronet("live", "report", str(journal), "-o", f"port={port}", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["data"]["model"] == "live account" and set(doc["data"]["symbols"]) == set(EachOnce.symbols)
    assert doc["stats"]["total_net_profit"] == money and money != 0
    assert {t["symbol"] for t in doc["trades"]} == set(EachOnce.symbols)
    assert (out / "report.html").exists() and (out / "trades.csv").exists()
