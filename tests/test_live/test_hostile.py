"""``neuronet live`` attacked as a careless or hostile user, or a broken terminal, would: each case is a
one-line error or a logged, journaled refusal, never a traceback and never a fill at a refused quote."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from test_live.live_support import backtest_of, runner, same_frames
from test_live.test_account_report import live_run
from test_live.test_cli_live import neuronet

from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits, LimitsError
from neuronet.live.quotes import QuoteError, check_prices, check_time, quote_of
from neuronet.live.report import journal_result

# A terminal that answers garbage to symbol_info_tick: the answers planned, in order (Python source).
GARBAGE = [
    "None",
    "{'bid': float('nan')}",
    "{'ask': 0.5}",  # below the bid
    "{'bid': None}",
    "{'bid': 0.0, 'ask': 0.0}",
    "{'time': 4_000_000_000}",  # 2096: the future
    "{'time': 86_400}",  # 1970: far past
    "{'time': 'soon'}",
]


def plan(sim, *quotes: str) -> None:
    sim.conn.execute(f"import MetaTrader5 as _m\n_m.BAD_QUOTES[:] = [{', '.join(quotes)}]")


@pytest.fixture
def bad_quotes(sim):
    yield lambda *quotes: plan(sim, *quotes)
    plan(sim)


def _warnings(journal) -> list[str]:
    return [r["message"] for r in read_journal(journal) if r["type"] == "warning"]


def test_garbage_quotes_are_refused_journaled_and_never_filled_on_paper(port, sim, tmp_path, bad_quotes):
    journal = tmp_path / "run.jsonl"
    bad_quotes(*GARBAGE)
    runner(port, sim, journal, max_bars=30).run()
    said = _warnings(journal)
    for part in ("no quote for", "not a tradable price", "the ask is below the bid",
                 "in the future of the bar", "stale", "cannot be read"):
        assert any(part in m for m in said), part
    # No decision was taken at a refused quote: the bars whose open quote was refused were decided at
    # their own open once closed, and the trades are the backtest's of the same bars.
    opens = [r for r in read_journal(journal) if r["type"] == "open"]
    assert all(math.isfinite(r["bid"]) and 1.0 < r["bid"] <= r["ask"] < 1.3 for r in opens)
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)


def test_a_live_request_at_a_garbage_quote_is_refused_with_no_quotes(port, sim, tmp_path, bad_quotes):
    from strategies import ExpertAdvisor

    class Buyer(ExpertAdvisor):
        def on_bar(self) -> None:
            if not self.positions():
                bad_quotes("{'bid': float('nan')}")  # the quote the order is checked at
                self.buy(0.1)

    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=Buyer, params={}, bars=2)
    assert not sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD")
    results = [r for r in read_journal(journal) if r["type"] == "result" and r.get("call") == "order"]
    assert results and all(r["value"] is None and r["retcode"] == 10021 for r in results)
    notes = [r.get("terminal") or {} for r in read_journal(journal)]
    refused = [n for n in notes if n.get("event") == "refused"]
    assert refused and "not a tradable price" in refused[0]["reason"]


@pytest.mark.parametrize(
    ("bid", "ask", "message"),
    [
        (None, 1.1, "not prices"),
        ("x", 1.1, "not prices"),
        (float("nan"), 1.1, "not a tradable price"),
        (1.1, float("inf"), "not a tradable price"),
        (-1.0, 1.1, "not a tradable price"),
        (1.1, 1.0, "the ask is below the bid"),
    ],
)
def test_prices_a_quote_cannot_be_traded_on(bid, ask, message):
    with pytest.raises(QuoteError, match=message):
        check_prices("EURUSD", bid, ask)


def test_quote_times_far_from_the_bar_are_refused():
    bar = pd.Timestamp("2024-03-07 10:00", tz="UTC")
    check_time("EURUSD", bar + pd.Timedelta(minutes=59), bar, 3600)
    check_time("EURUSD", bar - pd.Timedelta(minutes=30), bar, 3600)  # the bar may open on a late tick
    with pytest.raises(QuoteError, match="stale"):
        check_time("EURUSD", bar - pd.Timedelta(hours=2), bar, 3600)
    with pytest.raises(QuoteError, match="in the future"):
        check_time("EURUSD", bar + pd.Timedelta(hours=2), bar, 3600)
    for tick in (None, object()):
        with pytest.raises(QuoteError):
            quote_of("EURUSD", tick)


def test_a_journal_resumed_with_another_symbol_or_timeframe_is_refused(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    runner(port, sim, journal, max_bars=2).run()
    from datafeeds.terminal import TerminalSource
    from datafeeds.timeframes import Timeframe
    from neuronet.live.runner import LiveRunner, LiveSettings
    from strategies.sma import SmaCrossEA

    for symbol, tf in (("GBPUSD", "H1"), ("EURUSD", "M30")):
        s = LiveSettings(symbol, Timeframe.parse(tf), journal, history_bars=300, max_bars=2)
        src = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
        try:
            with pytest.raises(JournalError, match="belongs to another run"):
                LiveRunner(SmaCrossEA, {"fast": 5, "slow": 12}, src, s, sleep=sim.sleep).run()
        finally:
            src.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"time,open,high,low,close\n2024-01-01,1,1,1,1\n", "line 1: not JSON"),
        (b"\x00\x01\x02\xff\xfe\n", "line 1: not JSON"),
        (b"", "is empty"),
        (b"\n\n  \n", "is empty"),
        (b'["start"]\n', "unknown record 'list'"),
    ],
)
def test_a_file_that_is_not_a_journal_is_refused(tmp_path, content, message):
    path = tmp_path / "j.jsonl"
    path.write_bytes(content)
    with pytest.raises(JournalError, match=message):
        journal_result(path)


def test_a_journal_path_that_is_a_directory_is_one_error(tmp_path):
    with pytest.raises(JournalError, match=r"journal .* is a directory; give a file name"):
        journal_result(tmp_path)
    with pytest.raises(JournalError, match="journal /dev/null is not a regular file"):
        journal_result("/dev/null")


def test_a_kill_switch_that_is_a_directory_is_refused(tmp_path):
    with pytest.raises(LimitsError, match="is a directory"):
        Limits(max_lots=1, max_positions=1, max_daily_loss=10, symbols=("EURUSD",), kill_switch=tmp_path)


def test_a_runaway_line_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    from neuronet.live import journal as journal_module

    monkeypatch.setattr(journal_module, "MAX_LINE", 2**20)
    path = tmp_path / "j.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"type": "start", "version": 1}\n')
        f.write(b"x" * (3 * 2**20))  # a 1 GB line, scaled down: refused at the bound, not read to its end
    with pytest.raises(JournalError, match="line 2: longer than 1 MiB; not a journal"):
        read_journal(path)


LIMITS = ("--live", "--max-lots", "1", "--max-positions", "1", "--max-daily-loss", "100", "--allow-symbol",
          "EURUSD")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--max-bars", "0"), "max_bars (--max-bars) must be >= 1, not 0"),
        (("--poll", "-1"), "poll_s (--poll) must be >= 0 seconds, not -1.0"),
        (("--poll", "nan"), "poll_s (--poll) must be >= 0 seconds"),
        ((*LIMITS, "--deviation", "-1"), "--deviation must be a whole number of points >= 0, not -1"),
        ((*LIMITS, "--kill-switch", "."), "limit kill_switch: . is a directory"),
        ((*LIMITS, "--kill-switch", "no/such/STOP"), "the folder of no/such/STOP does not exist"),
        (("--journal", "."), "journal . is a directory; give a file name"),
        (("--journal", "/dev/null"), "journal /dev/null is not a regular file"),
        (("--symbol", " "), "symbol (--symbol) must name a symbol, not ' '"),
        (("--deposit", "nan"), "invalid account setting deposit=nan"),
        (("--journal", "data.csv"), "journal data.csv line 1: not JSON"),
    ],
)
def test_careless_command_lines_are_one_line_errors(tmp_path, args, message):
    (tmp_path / "data.csv").write_text("time,open,high,low,close\n2024-01-01,1,1,1,1\n")
    res = neuronet("live", "SmaCrossEA", "-o", "port=1", "-o", "connect_timeout=1", *args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "journals").exists()  # refused before anything was written


def test_a_symbol_never_leads_the_default_journal_out_of_its_folder(tmp_path):
    from neuronet.commands.live import _file_name

    assert _file_name("SmaCrossEA-../../etc/x-H1-paper.jsonl") == "SmaCrossEA-.._.._etc_x-H1-paper.jsonl"
    assert _file_name("../x") == "_x" and _file_name("EURUSD.m#1+") == "EURUSD.m#1+"
    (tmp_path / "work").mkdir()
    res = neuronet("live", "SmaCrossEA", "--symbol", "../../x", "-o", "port=1", "-o", "connect_timeout=1",
                   cwd=tmp_path / "work")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["work"]


def test_a_journal_in_a_missing_folder_is_created_there(port, sim, tmp_path):
    journal = tmp_path / "a" / "b" / "run.jsonl"
    runner(port, sim, journal, max_bars=2).run()
    assert read_journal(journal)[-1]["type"] == "stop"
