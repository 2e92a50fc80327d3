"""One live runner over a multi-symbol, multi-timeframe EA on the simulated terminal (a real RPyC server):
paper figures equal the backtest's on the same bars, every request is journaled with its symbol, look-ahead
rules are the backtest's, and a journal of another symbol set is refused."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from test_live.live_support import OPEN_SOURCES

from backtests import AccountConfig, Backtest
from datafeeds.symbols import SymbolSpec
from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import JournalError, LiveError
from neuronet.live.journal import read_journal
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.runner import LiveSettings
from strategies.base import ExpertAdvisor
from strategies.trend_filter import TrendFilterEA

PARAMS = {"daily": 3, "hourly": 4, "lots": 0.1}


def multi_runner(port, sim, journal, ea=TrendFilterEA, params=PARAMS, sleep=None, **settings):
    settings.setdefault("history_bars", 200)
    settings.setdefault("max_bars", 30)
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    main_tf = (ea.timeframes or ("H1",))[0]
    s = LiveSettings(ea.symbols[0], Timeframe.parse(main_tf), journal, **settings)
    return MultiLiveRunner(ea, params, source, s, sleep=sleep or sim.sleep, status=lambda line: None)


class Probe(ExpertAdvisor):
    """Records, at each decision, the newest bar of each view."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "D1")
    seen: ClassVar[list] = []

    def on_bar(self) -> None:
        type(self).seen.append(
            (
                self.time_current,
                self.data("EURUSD", "D1").time[-1],
                self.data("GBPUSD", "H1").time[-1],
                self.data().time[-1],
            )
        )


def test_a_d1_bar_is_visible_only_once_closed_and_every_symbol_shows_its_last_closed_bar(
    mt5_server, sim, tmp_path
):
    Probe.seen = []
    multi_runner(mt5_server[1], sim, tmp_path / "j.jsonl", ea=Probe, params={}, max_bars=60).run()
    assert len(Probe.seen) >= 60
    hour, day = pd.Timedelta(hours=1), pd.Timedelta(days=1)
    for now, d1, gbp_h1, main in Probe.seen:
        assert main + hour <= now  # the main chart's newest bar has closed (a weekend lies between some)
        assert gbp_h1 == main  # the other symbol's newest bar is the same hour (the terminal has it)
        assert now - d1 >= day - hour  # a D1 bar only after its broker day ended (23 h across DST)
    changes = [
        (now, d1)
        for (now, d1, *_), (_, before, *_) in zip(Probe.seen[1:], Probe.seen, strict=False)
        if d1 != before
    ]
    assert changes  # a new D1 bar appeared during the run: at the first decision after its close
    for now, d1 in changes:
        assert now - d1 in (day - hour, day, day + hour) or now.day_of_week == 6  # Sunday: after a weekend


class Basket(ExpertAdvisor):
    """Each of three symbols on its own: long above its mean of the last ``n`` H1 closes, short below."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    timeframes = ("H1",)
    n: int = 4
    lots: float = 0.1

    def on_bar(self) -> None:
        for symbol in self.symbols:
            bars = self.data(symbol, "H1")
            if len(bars) < self.n:
                continue
            side = np.sign(bars.close[-1] - bars.close[-self.n :].mean())
            held = self.position_of(symbol)
            if held and np.sign(held) != side:
                self.close(symbol=symbol)
                held = 0.0
            if side and not held:
                (self.buy if side > 0 else self.sell)(self.lots, symbol=symbol, comment=f"b{symbol}")


def test_paper_and_backtest_give_the_same_trades_on_the_same_bars(mt5_server, sim, tmp_path):
    journal = tmp_path / "basket.jsonl"
    run = multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=40)
    run.run()
    paper = run.paper.brokers["EURUSD"].deals_frame()
    assert set(paper["symbol"]) == {"EURUSD", "GBPUSD", "USDJPY"}  # every symbol traded, on one account
    requests = [r for r in read_journal(journal) if r["type"] == "request"]
    assert requests and all(r["symbol"] in Basket.symbols for r in requests)
    # The backtest over the very bars the run saw: the terminal's own, from its first to its last.
    source = TerminalSource("127.0.0.1", mt5_server[1], retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    candles = {}
    for name in Basket.symbols:
        feed = run.views.feeds[(name, "H1")]
        df = source.fetch(name, "H1").frame
        candles[name] = df[(df.index >= feed.time[0]) & (df.index <= feed.time[-1])]
        assert np.array_equal(candles[name]["close"].to_numpy(), feed.column("close"))
    start = read_journal(journal)[0]
    specs = {k: SymbolSpec(**v) for k, v in start["specs"].items()}
    fs = candles["EURUSD"].index[start["forward_start"]]
    result = Backtest(candles, Basket, account=AccountConfig(), forward=fs, specs=specs).run()
    backtest = result.deals
    cols = ["symbol", "type", "entry", "lots", "price", "time", "profit", "swap", "balance"]
    ours = paper[cols].reset_index(drop=True)
    theirs = backtest[cols].reset_index(drop=True)
    # The backtest closes what is open at its end ("end of test" deals); the paper run leaves it open.
    theirs = theirs.iloc[: len(ours)]
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
    assert len(ours) >= 6


def test_a_journal_of_another_symbol_set_is_refused(mt5_server, sim, tmp_path):
    journal = tmp_path / "j.jsonl"
    multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=2).run()
    size = journal.stat().st_size

    class Pair(Basket):
        symbols = ("EURUSD", "GBPUSD")

    Pair.__name__ = "Basket"  # the same EA name and parameters: only the symbol set differs
    with pytest.raises(JournalError, match="symbols"):
        multi_runner(mt5_server[1], sim, journal, ea=Pair, params={}, max_bars=2).run()
    assert journal.stat().st_size == size  # nothing written


def test_an_ea_symbol_the_terminal_does_not_know_is_refused_by_name(mt5_server, sim, tmp_path):
    class Odd(Basket):
        symbols = ("EURUSD", "XAUEUR")

    journal = tmp_path / "j.jsonl"
    with pytest.raises(LiveError, match="XAUEUR"):
        multi_runner(mt5_server[1], sim, journal, ea=Odd, params={}, max_bars=2).run()
    assert not journal.exists() or journal.stat().st_size == 0  # refused before the run began


def test_a_resumed_paper_run_books_as_one_run_did(mt5_server, sim, tmp_path):
    from test_live.conftest import START

    whole = multi_runner(mt5_server[1], sim, tmp_path / "whole.jsonl", ea=Basket, params={}, max_bars=20)
    whole.run()
    sim.market.set_now(START)
    journal = tmp_path / "split.jsonl"
    multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=8).run()
    resumed = multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=12)
    resumed.run()
    assert resumed.summary.resumed
    a = whole.paper.brokers["EURUSD"].deals_frame()
    b = resumed.paper.brokers["EURUSD"].deals_frame()
    assert len(a) >= 6
    pd.testing.assert_frame_equal(a, b)


def test_the_report_of_a_multi_symbol_paper_journal_is_the_backtests_with_a_symbol_column(
    mt5_server, sim, tmp_path
):
    from neuronet.live.report import journal_result

    journal = tmp_path / "basket.jsonl"
    run = multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=30)
    run.run()
    got = journal_result(journal)
    source = TerminalSource("127.0.0.1", mt5_server[1], retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    candles = {}
    for name in Basket.symbols:
        feed = run.views.feeds[(name, "H1")]
        df = source.fetch(name, "H1").frame
        candles[name] = df[(df.index >= feed.time[0]) & (df.index <= feed.time[-1])]
    start = read_journal(journal)[0]
    specs = {k: SymbolSpec(**v) for k, v in start["specs"].items()}
    fs = candles["EURUSD"].index[start["forward_start"]]
    want = Backtest(candles, Basket, account=AccountConfig(), forward=fs, specs=specs).run()
    cols = [
        "symbol",
        "type",
        "lots",
        "entry_time",
        "entry_price",
        "exit_time",
        "exit_price",
        "exit_reason",
        "net_profit",
    ]
    assert set(got.trades["symbol"]) == set(Basket.symbols)
    pd.testing.assert_frame_equal(
        got.trades[cols].reset_index(drop=True), want.trades[cols].reset_index(drop=True), check_dtype=False
    )
    assert got.stats["total_net_profit"] == want.stats["total_net_profit"]
    for name in Basket.symbols:
        assert got.data["symbols"][name]["trades"] == want.data["symbols"][name]["trades"]
        assert got.data["symbols"][name]["net_profit"] == want.data["symbols"][name]["net_profit"]


@pytest.mark.parametrize(
    "gbpusd",
    [
        "{'ask': 0.5}",
        "{'time': 2000000000}",
        "{'bid': float('nan')}",
        "None",
        "{'time': _m.SIM.book.quote('GBPUSD')[0] - 7200}",  # two hours old: from before the bar before
    ],
    ids=["crossed", "stamped-in-2033", "nan", "none", "stale"],
)
def test_a_hostile_quote_of_one_symbol_closes_its_market_for_that_bar_only(
    mt5_server, sim, tmp_path, bad_quotes, gbpusd
):
    """A hostile terminal answers GBPUSD's quote at the first bar's open with an ask below the bid, a time
    years ahead, a NaN, nothing, or a quote from before the bar before (stale, on paper as live): that
    bar has no GBPUSD market on paper (the backtest's "market closed", 10018); EURUSD and USDJPY trade."""
    bad_quotes("{}", gbpusd, "{}")  # EURUSD, GBPUSD, USDJPY at the first open, in that order
    journal = tmp_path / "j.jsonl"
    run = multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=1)
    run.run()
    recs = read_journal(journal)
    first = next(r for r in recs if r["type"] == "open")
    assert first["quotes"]["GBPUSD"] is None and first["quotes"]["EURUSD"] is not None
    said = [r["message"] for r in recs if r["type"] == "warning"]
    assert any(m.startswith("GBPUSD: ") and "no market for it" in m for m in said), said  # journaled why
    results = {r["symbol"]: r["retcode"] for r in recs if r["type"] == "result"}
    assert results["GBPUSD"] == 10018 and results["EURUSD"] == results["USDJPY"] == 10009
    assert set(run.paper.brokers["EURUSD"].deals_frame()["symbol"]) == {"EURUSD", "USDJPY"}


def test_two_runs_on_one_multi_symbol_journal_are_refused(mt5_server, sim, tmp_path):
    from neuronet.live.journal import Journal

    journal = tmp_path / "j.jsonl"
    multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=1).run()
    size = journal.stat().st_size
    with Journal(journal), pytest.raises(JournalError, match="in use by another run"):
        multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=1).run()
    assert journal.stat().st_size == size


def test_close_on_exit_closes_every_symbol_at_its_own_quote_then(mt5_server, sim, tmp_path):
    journal = tmp_path / "j.jsonl"
    run = multi_runner(mt5_server[1], sim, journal, ea=Basket, params={}, max_bars=5, close_on_exit=True)
    run.run()
    assert run.ctx.positions() == []
    recs = read_journal(journal)
    quotes = [r for r in recs if r["type"] == "tick"][-1]["quotes"]
    deals = run.paper.brokers["EURUSD"].deals_frame()
    exits = deals[deals["entry"] == "out"].groupby("symbol").tail(1)
    assert set(exits["symbol"]) == set(Basket.symbols)
    for _, deal in exits.iterrows():
        bid, ask = quotes[deal["symbol"]]
        assert deal["price"] == pytest.approx(bid if deal["type"] == "sell" else ask, abs=1e-9)


class Ticks(ExpertAdvisor):
    """Records, at each tick, every symbol's bid as the EA reads it."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1",)
    seen: ClassVar[list] = []

    def on_tick(self, tick) -> None:
        type(self).seen.append((tick.bid, self.bid_of("EURUSD"), self.bid_of("GBPUSD")))


def test_on_tick_sees_every_symbols_quote(mt5_server, sim, tmp_path):
    Ticks.seen = []
    journal = tmp_path / "j.jsonl"

    def sleep(_):  # a poll: twenty minutes of the terminal's time
        sim.market.advance(1200)

    multi_runner(mt5_server[1], sim, journal, ea=Ticks, params={}, max_bars=3, sleep=sleep).run()
    ticks = [r["quotes"] for r in read_journal(journal) if r["type"] == "tick"]
    assert len(ticks) >= 4 and len(Ticks.seen) == len(ticks)
    for (main, eur, gbp), quotes in zip(Ticks.seen, ticks, strict=True):
        assert main == eur == quotes["EURUSD"][0] and gbp == quotes["GBPUSD"][0]


def test_a_paper_run_stopped_in_the_middle_of_a_bar_and_resumed_books_as_one_that_never_stopped(
    mt5_server, sim, tmp_path
):
    from test_live.conftest import START
    from test_live.multi_eas import STOP, StopMidway

    STOP["midway"] = True  # never stops
    whole = multi_runner(mt5_server[1], sim, tmp_path / "whole.jsonl", ea=StopMidway, params={}, max_bars=6)
    whole.run()
    sim.market.set_now(START)
    STOP["midway"] = False  # stops once, after the first symbol's order of the first bar
    journal = tmp_path / "split.jsonl"
    with pytest.raises(KeyboardInterrupt):
        multi_runner(mt5_server[1], sim, journal, ea=StopMidway, params={}, max_bars=6).run()
    resumed = multi_runner(mt5_server[1], sim, journal, ea=StopMidway, params={}, max_bars=6)
    resumed.run()
    a = whole.paper.brokers["EURUSD"].deals_frame()
    b = resumed.paper.brokers["EURUSD"].deals_frame()
    assert len(a) == 3 * 6  # every symbol bought at every bar, once
    pd.testing.assert_frame_equal(a, b)


def test_the_command_line_runs_a_multi_symbol_ea_on_paper_with_a_clock_moving_while_it_reads_history(
    mt5_server, sim, tmp_path, monkeypatch
):
    """``neuronet live TrendFilterEA`` against the simulated terminal, its clock running by itself (ten
    hours a second), as the README's example runs it. The clock moved while the symbols' histories were
    read one after the other: GBPUSD's and USDJPY's went past EURUSD's last bar, the paper account's
    timeline with them, and the first bar decided "did not follow the last bar"."""
    from cli_table import invoke
    from test_live.conftest import START

    monkeypatch.chdir(tmp_path)
    sim.market.run_clock(START, 36_000)
    argv = ["live", "TrendFilterEA", "-p", "daily=3", "-p", "hourly=4", "-o", f"port={mt5_server[1]}",
            "--history", "100", "--poll", "0.05", "--max-bars", "3"]  # fmt: skip
    code, text = invoke(argv)
    assert code == 0, text
    assert "TrendFilterEA paper on EURUSD, GBPUSD, USDJPY on H1, D1" in text
    assert "stopped after 3 bars" in text
    journal = tmp_path / "journals" / "TrendFilterEA-EURUSD+GBPUSD+USDJPY-H1+D1-paper.jsonl"
    start = read_journal(journal)[0]
    assert start["symbols"] == ["EURUSD", "GBPUSD", "USDJPY"] and start["timeframes"] == ["H1", "D1"]
