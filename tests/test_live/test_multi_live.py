"""A multi-symbol EA on a live account of the simulated terminal (a real RPyC server): one
``TerminalTrade`` per symbol under its own limits and the account's, each request journaled with its
symbol before it is sent, a lost reply looked up by symbol and never sent again, and a restart in the
middle of a bar (a stop, or a killed process) sending only what was not sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_live.live_support import OPEN_SOURCES
from test_live.multi_eas import DIE_AFTER, STOP, BuyAll, EachOnce, StopMidway

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.journal import read_journal
from neuronet.live.limits import AccountLimits, Limits
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.runner import LiveSettings
from neuronet.live.terminal_trade import TerminalTrade

ROOT = Path(__file__).resolve().parents[2]


def live_runner(
    port, sim, journal, ea=EachOnce, *, bars, per_symbol=None, account_positions=None, status=None, **kw
):
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=0.5, backoff=0.01)
    OPEN_SOURCES.append(source)
    limits = per_symbol or Limits(max_lots=1.0, max_positions=1, max_daily_loss=10_000.0, symbols=ea.symbols)
    holder = {}

    def factory(src, symbol, magic, record, *, market):
        checked = AccountLimits(limits, account_positions, lambda day=None: holder["run"].account_state(day))
        return TerminalTrade(
            src,
            symbol,
            magic=magic,
            limits=checked,
            record=record,
            clock=src.clock,
            market=market,
            lost_reply_wait=0.2,
            backoff=0.01,
            **kw,
        )

    settings = LiveSettings(
        ea.symbols[0], Timeframe.H1, journal, mode="live", history_bars=100, max_bars=bars
    )
    run = MultiLiveRunner(
        ea, {}, source, settings, trading=factory, sleep=sim.sleep, status=status or (lambda _: None)
    )
    holder["run"] = run
    return run


def _sent(sim) -> dict[str, int]:
    """Deals the terminal executed, per symbol."""
    out: dict[str, int] = {}
    for deal in sim.state.book.deals:
        out[deal.symbol] = out.get(deal.symbol, 0) + 1
    return out


def _held(sim) -> dict[str, float]:
    return {p["symbol"]: p["volume"] for p in sim.state.book.positions.values()}


def test_each_symbol_is_traded_on_its_own_terminal_context_and_journaled_with_its_symbol(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_runner(port, sim, journal, bars=3).run()
    assert _held(sim) == {"EURUSD": 0.1, "GBPUSD": 0.1, "USDJPY": 0.1}
    assert sim.state.book.executed == 3  # one each, never again (held: max one position per symbol)
    recs = read_journal(journal)
    requests = [r for r in recs if r["type"] == "request" and r.get("source") != "terminal"]
    assert [r["symbol"] for r in requests[:3]] == ["EURUSD", "GBPUSD", "USDJPY"]
    sent = [r for r in recs if r.get("source") == "terminal" and r["terminal"]["event"] == "request"]
    assert [r["symbol"] for r in sent] == ["EURUSD", "GBPUSD", "USDJPY"]
    for r in sent:  # the terminal request journaled before it was sent, under its symbol
        assert r["terminal"]["request"]["symbol"] == r["symbol"]


def test_the_account_wide_cap_refuses_what_the_per_symbol_limits_let_through(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_runner(port, sim, journal, bars=3, account_positions=2).run()
    assert set(_held(sim)) == {"EURUSD", "GBPUSD"}  # the third symbol's order refused: 2 held already
    refused = [
        r["terminal"]
        for r in read_journal(journal)
        if r.get("source") == "terminal" and r["terminal"]["event"] == "refused"
    ]
    assert refused and all("account-wide limit is 2" in n["reason"] for n in refused)
    assert {n["retcode"] for n in refused} == {10027}


def test_a_symbol_over_its_own_lot_limit_is_refused_and_the_others_trade(port, sim, tmp_path):
    class Big(EachOnce):
        def on_bar(self):
            for symbol, lots in zip(self.symbols, (0.1, 0.5, 0.1), strict=True):
                if not self.positions(symbol):
                    self.buy(lots, symbol=symbol)

    limits = Limits(max_lots=0.2, max_positions=1, max_daily_loss=10_000.0, symbols=EachOnce.symbols)
    live_runner(port, sim, tmp_path / "live.jsonl", ea=Big, bars=2, per_symbol=limits).run()
    assert _held(sim) == {"EURUSD": 0.1, "USDJPY": 0.1}


def test_the_daily_loss_counts_the_whole_account(port, sim, tmp_path):
    """Each symbol alone has lost less than the limit; together they have lost more: no new orders."""
    journal = tmp_path / "live.jsonl"
    live_runner(port, sim, journal, bars=1).run()
    assert len(_held(sim)) == 3
    for symbol in EachOnce.symbols:
        sim.state.book.move(symbol, -400)  # every long loses about 40 USD on 0.1 lots
    limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=100.0, symbols=EachOnce.symbols)

    class More(EachOnce):
        def on_bar(self):
            self.buy(0.1, symbol="EURUSD")

    More.__name__ = "EachOnce"
    more = tmp_path / "more.jsonl"
    live_runner(port, sim, more, ea=More, bars=1, per_symbol=limits).run()
    assert sim.state.book.executed == 3  # nothing more sent
    notes = [r["terminal"] for r in read_journal(more) if r.get("source") == "terminal"]
    assert any(n["event"] == "halted" for n in notes)
    assert any(n["event"] == "refused" and "daily loss limit 100" in n["reason"] for n in notes)


def test_a_lost_reply_on_one_symbol_is_looked_up_by_symbol_and_never_sent_again(port, sim, tmp_path):
    sim.state.book.configure(lost_replies=(1, -10005))  # GBPUSD's order executes, its reply is lost
    journal = tmp_path / "live.jsonl"
    live_runner(port, sim, journal, bars=4).run()
    assert _held(sim) == {"EURUSD": 0.1, "GBPUSD": 0.1, "USDJPY": 0.1}
    assert sim.state.book.executed == 3 and _sent(sim) == {"EURUSD": 1, "GBPUSD": 1, "USDJPY": 1}
    notes = [r for r in read_journal(journal) if r.get("source") == "terminal"]
    found = [r for r in notes if r["terminal"]["event"] == "recovered"]
    assert [r["symbol"] for r in found] == ["GBPUSD"]  # found on the terminal by its symbol and comment


ROOMY = Limits(max_lots=1.0, max_positions=5, max_daily_loss=10_000.0, symbols=EachOnce.symbols)


def test_a_stop_in_the_middle_of_a_bar_resumes_sending_only_what_was_not_sent(port, sim, tmp_path):
    """The EA buys every symbol at every bar (the limits let a second order through): the bar cut short
    after EURUSD's order is decided again on resume, and EURUSD's order is not sent again."""
    STOP["midway"] = False
    journal = tmp_path / "live.jsonl"
    with pytest.raises(KeyboardInterrupt):
        live_runner(port, sim, journal, ea=StopMidway, bars=3, per_symbol=ROOMY).run()
    assert _sent(sim) == {"EURUSD": 1}
    run = live_runner(port, sim, journal, ea=StopMidway, bars=1, per_symbol=ROOMY)
    run.run()
    assert _sent(sim) == {"EURUSD": 1, "GBPUSD": 1, "USDJPY": 1}  # EURUSD's order was not sent twice
    assert run.summary.resumed and run.summary.decisions == 1
    live_runner(port, sim, journal, ea=StopMidway, bars=1, per_symbol=ROOMY).run()  # next bar: all three
    assert _sent(sim) == {"EURUSD": 2, "GBPUSD": 2, "USDJPY": 2}


def test_a_killed_process_resumed_sends_only_what_was_not_sent(port, sim, tmp_path):
    """A real process on 127.0.0.1 killed (SIGKILL) right after the first symbol's order of a bar."""
    journal = tmp_path / "live.jsonl"
    flag = tmp_path / "die"
    flag.touch()
    script = tmp_path / "run.py"
    script.write_text(
        "import pathlib, rpyc\n"
        "from test_live.test_multi_live import ROOMY, live_runner\n"
        "from test_live.conftest import Sim\n"
        "from test_live.multi_eas import BuyAll\n"
        f"sim = Sim(rpyc.classic.connect('127.0.0.1', {port}))\n"
        f"journal = pathlib.Path({str(journal)!r})\n"
        f"live_runner({port}, sim, journal, ea=BuyAll, bars=3, per_symbol=ROOMY).run()\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}", DIE_AFTER: str(flag)}
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert _sent(sim) == {"EURUSD": 1}
    assert read_journal(journal)[-1]["type"] != "stop"  # no clean stop: killed
    live_runner(port, sim, journal, ea=BuyAll, bars=1, per_symbol=ROOMY).run()
    assert _sent(sim) == {"EURUSD": 1, "GBPUSD": 1, "USDJPY": 1}


def test_a_bar_cut_short_that_closed_while_stopped_sends_nothing_at_the_price_now(port, sim, tmp_path):
    """Resumed three hours later, the bar cut short has closed: its requests not sent are refused (10021),
    not sent at today's price, and the one sent before the stop is not sent again."""
    STOP["midway"] = False
    journal = tmp_path / "live.jsonl"
    with pytest.raises(KeyboardInterrupt):
        live_runner(port, sim, journal, ea=StopMidway, bars=3, per_symbol=ROOMY).run()
    sim.market.advance(3 * 3600)
    live_runner(port, sim, journal, ea=StopMidway, bars=1, per_symbol=ROOMY).run()
    recs = read_journal(journal)
    resumed = next(i for i, r in enumerate(recs) if r["type"] == "resume")
    first = [r for r in recs[resumed:] if r["type"] == "result" and r.get("source") != "terminal"][:2]
    assert [(r["symbol"], r["retcode"]) for r in first] == [("GBPUSD", 10021), ("USDJPY", 10021)]
    assert _sent(sim) == {"EURUSD": 1}  # the run stops as the late bar closes: nothing else was sent
