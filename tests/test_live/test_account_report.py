"""``neuronet live report`` of a live account: the journal's bars and settings, the terminal's deals.

A ``--live`` run trades on the simulated terminal behind a real RPyC server; its report must list the
trades the paper run of the same bars makes, with the money the terminal booked, and be written as a
backtest's report is.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_live.conftest import START
from test_live.live_support import MAGIC, OPEN_SOURCES, PARAMS, runner

from backtests.report import write_report
from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.account_report import stop_changes
from neuronet.live.errors import JournalError
from neuronet.live.limits import Limits
from neuronet.live.report import journal_result
from neuronet.live.runner import LiveRunner, LiveSettings
from neuronet.live.terminal_trade import TerminalTrade
from strategies import ExpertAdvisor
from strategies.sma import SmaCrossEA

BARS = 60
LIMITS = Limits(max_lots=1.0, max_positions=2, max_daily_loss=50_000.0, symbols=("EURUSD",))


def source(port: int) -> TerminalSource:
    src = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(src)
    return src


def live_run(
    port: int,
    sim,
    journal: Path,
    *,
    limits: Limits = LIMITS,
    ea=SmaCrossEA,
    params=PARAMS,
    bars: int = BARS,
    **settings,
) -> list[str]:
    def factory(src, symbol, magic, record, *, market):
        return TerminalTrade(
            src, symbol, magic=magic, limits=limits, record=record, clock=src.clock, market=market
        )

    s = LiveSettings(
        "EURUSD", Timeframe.H1, journal, mode="live", history_bars=300, max_bars=bars, **settings
    )
    lines: list[str] = []
    params = {"magic": MAGIC, **params}  # the EA's own number on a live account
    LiveRunner(ea, params, source(port), s, trading=factory, sleep=sim.sleep, status=lines.append).run()
    return lines


def terminal_money(sim, magic: int) -> float:
    """Profit, commission, swap and fee of every deal of ``magic`` on the terminal (read field by field)."""
    deals = sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ()
    return sum(
        float(d.profit) + float(d.commission) + float(d.swap) + float(d.fee)
        for d in deals
        if int(d.magic) == magic
    )


@pytest.fixture
def runs(port, sim, tmp_path):
    """The same bars traded live (closing at the stop) and on paper (likewise): the live run's report
    (made before the terminal is reset), the paper run's, and the money of the live run's deals."""
    live = tmp_path / "live.jsonl"
    live_run(port, sim, live, close_on_exit=True)
    money = terminal_money(sim, MAGIC)
    got = journal_result(live, source(port))
    sim.state.reset()
    sim.market.set_now(START)
    paper = tmp_path / "paper.jsonl"
    runner(port, sim, paper, max_bars=BARS, close_on_exit=True).run()
    return got, journal_result(paper), money


def test_the_live_report_has_the_paper_runs_trades_and_the_terminals_money(runs):
    got, want, money = runs
    assert got.data["model"] == "live account" and got.data["open_positions"] == 0
    assert len(got.trades) == len(want.trades) >= 3
    same = [
        "type",
        "lots",
        "entry_time",
        "entry_price",
        "exit_price",
        "exit_reason",
        "commission",
        "swap",
        "profit",
        "net_profit",
        "entry_bar",
        "exit_bar",
        "mae",
        "mfe",
    ]
    pd.testing.assert_frame_equal(got.trades[same], want.trades[same])
    # The close at the stop was made on the terminal in the bar forming after the last one closed.
    assert (got.trades["exit_time"].iloc[:-1] == want.trades["exit_time"].iloc[:-1]).all()
    assert got.trades["exit_time"].iloc[-1] == want.trades["exit_time"].iloc[-1] + pd.Timedelta(hours=1)
    assert set(got.trades["ticket"]) >= {1_000_001}  # the terminal's position tickets
    # The money is the terminal's: net profit and final balance from its deals.
    assert got.stats["total_net_profit"] == pytest.approx(money, abs=0.005)
    assert got.stats["final_balance"] == pytest.approx(got.account["deposit"] + money, abs=0.005)
    assert got.deals["profit"].sum() == pytest.approx(money, abs=1e-9)
    assert len(got.deals) == 2 * len(got.trades) and set(got.deals["entry"]) == {"in", "out"}
    assert len(got.orders) == len(got.deals) and set(got.orders["state"]) == {"filled"}
    # Balance and equity at each bar are the paper run's (same fills, the same valuation of open positions).
    np.testing.assert_allclose(got.balance, want.balance, atol=1e-6)
    np.testing.assert_allclose(got.equity["equity"], want.equity["equity"], atol=1e-6)
    for key in ("total_trades", "profit_factor", "equity_drawdown_maximal", "balance_drawdown_maximal"):
        assert got.stats[key] == pytest.approx(want.stats[key]), key


def test_the_live_report_files_are_written(runs, tmp_path):
    got, _, _ = runs
    page = write_report(got, tmp_path / "rep")
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert page.name == "report.html" and page.exists() and "SmaCrossEA" in page.read_text()
    assert doc["data"]["model"] == "live account" and doc["stats"]["total_trades"] == len(doc["trades"])
    assert (tmp_path / "rep" / "trades.csv").exists()


def test_a_live_journal_needs_the_terminal(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, bars=3)
    with pytest.raises(JournalError, match=r"'live' run: .*\(-o host=\.\.\. -o port=\.\.\.\)"):
        journal_result(journal)


def _send(sim, symbol: str, magic: int, kind: int = 0) -> None:
    """A market order on the terminal made by someone else (another EA, a person), sent on its side."""
    sim.conn.execute(
        "import MetaTrader5 as _m\n"
        f"_q = _m.symbol_info_tick({symbol!r})\n"
        f"_m.order_send({{'action': 1, 'symbol': {symbol!r}, 'volume': 0.5, 'type': {kind}, "
        f"'price': _q.ask if {kind} == 0 else _q.bid, 'magic': {magic}, 'type_filling': 0, 'comment': 'x'}})"
    )


def test_other_deals_on_the_account_are_left_out(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, bars=40, close_on_exit=True)
    before = journal_result(journal, source(port))
    deals_before = sim.conn.modules.MetaTrader5.history_deals_total(0, 2**31 - 1)
    _send(sim, "EURUSD", 777)  # another EA on the same symbol, inside the run's span
    _send(sim, "GBPUSD", MAGIC)  # the same magic number on another symbol
    sim.market.advance(5 * 3600)
    _send(sim, "EURUSD", MAGIC)  # after the run
    assert sim.conn.modules.MetaTrader5.history_deals_total(0, 2**31 - 1) == deals_before + 3
    after = journal_result(journal, source(port))
    pd.testing.assert_frame_equal(after.trades, before.trades)
    pd.testing.assert_frame_equal(after.deals, before.deals)
    assert after.stats.equals(before.stats) and before.stats["total_trades"] >= 1


def _edit_account(journal: Path, **fields) -> int:
    """Change (or with no fields, delete) the journal's account record; its line number."""
    lines = journal.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if '"type":"account"' in line)
    if fields:
        lines[k] = json.dumps({**json.loads(lines[k]), **fields})
    else:
        del lines[k]
    journal.write_text("\n".join(lines) + "\n")
    return k + 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "no account record"),
        ({"balance": "lots"}, r"line \d+: the account record cannot be read"),
        ({"magic": None}, r"line \d+: the account record cannot be read"),
        ({"balance": 0.0}, "the account at the start cannot be scored on"),
    ],
)
def test_a_damaged_account_record_is_refused(port, sim, tmp_path, fields, message):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, bars=3)
    _edit_account(journal, **fields)
    with pytest.raises(JournalError, match=message):
        journal_result(journal, source(port))


def test_requests_refused_by_a_limit_are_listed_as_rejected(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    tight = Limits(max_lots=0.01, max_positions=1, max_daily_loss=5_000.0, symbols=("EURUSD",))
    live_run(port, sim, journal, limits=tight, bars=30)
    got = journal_result(journal, source(port))
    assert got.trades.empty and got.deals.empty and got.stats["total_net_profit"] == 0
    assert got.rejected and {r["retcode"] for r in got.rejected} == {10027}
    assert all(r["action"] == "deal" and r["time"] and "0.01 lots" in r["reason"] for r in got.rejected)


def test_a_position_the_terminal_still_holds_is_closed_in_the_report_as_on_paper(port, sim, tmp_path):
    """Without ``--close-on-exit`` the last position stays open on the terminal: the live report closes it
    at the last close by the backtest's "end of test" exit, as the paper report does, and both agree."""
    live = tmp_path / "live.jsonl"
    live_run(port, sim, live, bars=40)
    held = sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD") or ()
    assert len(held) == 1
    money = terminal_money(sim, MAGIC)
    got = journal_result(live, source(port))
    assert len(sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD") or ()) == 1  # the report only
    sim.state.reset()
    sim.market.set_now(START)
    paper = tmp_path / "paper.jsonl"
    runner(port, sim, paper, max_bars=40).run()
    want = journal_result(paper)
    assert got.data["open_positions"] == 1 and want.trades["exit_reason"].iloc[-1] == "end of test"
    cols = [
        "type",
        "lots",
        "entry_time",
        "entry_price",
        "exit_time",
        "exit_price",
        "exit_reason",
        "profit",
        "net_profit",
        "entry_bar",
        "exit_bar",
    ]
    pd.testing.assert_frame_equal(got.trades[cols], want.trades[cols])
    assert got.trades["ticket"].iloc[-1] == held[0].ticket
    floating = got.trades["net_profit"].iloc[-1]
    assert floating != 0 and got.stats["total_net_profit"] == pytest.approx(money + floating, abs=0.005)
    assert got.stats["total_net_profit"] == pytest.approx(want.stats["total_net_profit"], abs=1e-6)
    np.testing.assert_allclose(got.balance, want.balance, atol=1e-6)
    np.testing.assert_allclose(got.equity["equity"], want.equity["equity"], atol=1e-6)
    assert got.balance[-1] == pytest.approx(got.equity["equity"].iloc[-1])


class Tightening(ExpertAdvisor):
    """Buys with wide stops, moves both 10 points closer at each bar, closes at every fourth bar."""

    def on_init(self) -> None:
        self.k = 0

    def on_bar(self) -> None:
        self.k += 1
        held = self.positions()
        if not held:
            self.buy(0.1, sl_points=2000, tp_points=2000)
        elif self.k % 4 == 0:
            self.close(held[0].ticket)
        else:
            pos = held[0]
            step = 10 * self.point
            self.modify(pos.ticket, sl=round(pos.sl + step, 5), tp=round(pos.tp - step, 5))


def test_the_stops_of_a_trade_are_those_in_force_at_its_exit(port, sim, tmp_path):
    """A modify is not in the deal history: the journal's successful ``sltp`` requests give each trade the
    levels it had when it closed, as the paper run's trades have them (the last one closed at the end)."""
    live = tmp_path / "live.jsonl"
    live_run(port, sim, live, ea=Tightening, params={}, bars=14)
    got = journal_result(live, source(port))
    sim.state.reset()
    sim.market.set_now(START)
    paper = tmp_path / "paper.jsonl"
    runner(port, sim, paper, ea=Tightening, params={}, max_bars=14).run()
    want = journal_result(paper)
    assert len(got.trades) == len(want.trades) >= 3
    cols = ["entry_time", "entry_price", "exit_time", "exit_price", "exit_reason", "sl", "tp"]
    pd.testing.assert_frame_equal(got.trades[cols], want.trades[cols])
    # The stops were set after each fill and moved later (sltp requests): none of them is in the deals.
    asked: dict[int, list[float]] = {}
    for line in live.read_text().splitlines():
        note = json.loads(line).get("terminal") or {}
        if note.get("event") == "request" and note.get("action") == "sltp":
            asked.setdefault(note["request"]["position"], []).append(note["request"]["sl"])
    assert got.orders["sl"].isna().all()
    assert list(got.trades["sl"]) == [asked[t][-1] for t in got.trades["ticket"]]
    assert all(len(asked[t]) >= 2 and asked[t][0] < asked[t][-1] for t in got.trades["ticket"][:-1])


def _sltp(line: int, tag: str, position, sl, tp) -> dict:
    request = {"action": 6, "position": position, "sl": sl, "tp": tp}
    return {
        "type": "request",
        "_line": line,
        "terminal": {"event": "request", "id": tag, "action": "sltp", "request": request},
    }


def _answer(line: int, tag: str, code: int, event: str = "result") -> dict:
    return {"type": "result", "_line": line, "terminal": {"event": event, "id": tag, "retcode": code}}


def test_only_successful_changes_of_stops_are_read_from_the_journal():
    call = {"type": "request", "_line": 1, "call": "modify", "time": "2024-03-07T12:00:00+00:00"}
    records = [
        call,
        _sltp(2, "nn00000001", 5, 1.09, 0.0),
        _answer(3, "nn00000001", 10009),  # done
        _sltp(4, "nn00000002", 5, 1.08, 1.2),
        _answer(5, "nn00000002", 10016),  # invalid stops: not in force
        _sltp(6, "nn00000003", 6, 1.07, 1.3),
        _answer(7, "nn00000003", 10012),  # the reply was lost ...
        {"type": "reconnect", "_line": 8},
        _answer(9, "nn00000003", 10009, event="recovered"),  # ... and the change found made
        _sltp(10, "nn00000004", 7, 1.06, 1.4),
        _answer(11, "nn00000004", 10012),  # lost and never found
    ]
    got = stop_changes("j.jsonl", records)
    ns = pd.Timestamp("2024-03-07 12:00", tz="UTC").value
    assert [(c.ns, c.position, c.sl, c.tp) for c in got] == [(ns, 5, 1.09, None), (ns, 6, 1.07, 1.3)]
    broken = [call, _sltp(2, "nn00000005", "five", 1.0, 1.0)]
    with pytest.raises(JournalError, match=r"j.jsonl line 2: a change of stops cannot be read"):
        stop_changes("j.jsonl", broken)
