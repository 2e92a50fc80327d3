"""The live runner in paper mode against the simulated terminal behind a real RPyC server, on simulated
time: bars close as the test's clock moves, and the run must match a backtest of the same bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rpyc.utils.classic import obtain
from test_live.live_support import LIVE_PARAMS, MAGIC, PARAMS, backtest_of, runner, same_frames

from neuronet.live.errors import JournalError, LiveError
from neuronet.live.journal import read_journal
from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor
from strategies.errors import EARuntimeError
from strategies.sma import SmaCrossEA

H1 = 16385


def _kinds(journal, kind):
    return [r for r in read_journal(journal) if r["type"] == kind]


def test_paper_run_across_a_dst_change_matches_the_backtest(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    lines: list[str] = []
    summary = runner(port, sim, journal, max_bars=60, lines=lines).run()
    assert summary.bars_closed == 60 and summary.decisions == 60 and summary.missed == 0
    assert len(lines) == 60 and "EURUSD H1 bid 1." in lines[0] and " equity " in lines[0]

    # Every bar the terminal closed, once, in order, stamped in UTC across the DST change (+2 -> +3).
    bars = _kinds(journal, "bar")
    times = pd.to_datetime([b["time"] for b in bars]).as_unit("s").asi8
    sim.market.set_now("2024-03-20 00:00")
    rates, utc = obtain(sim.market.history("EURUSD", H1))
    lo = int(np.searchsorted(utc, times[0]))
    assert list(times) == list(utc[lo : lo + 60])
    assert set((rates["time"][lo : lo + 60] - utc[lo : lo + 60]).tolist()) == {7200, 10800}
    assert [b["bar"] for b in bars] == list(range(bars[0]["bar"], bars[0]["bar"] + 60))

    # Same trades, same deals, same curves, same statistics as the backtest of those bars.
    live = journal_result(journal)
    bt, _ = backtest_of(journal)
    assert len(bt.trades) >= 3
    same_frames(live.trades, bt.trades)
    same_frames(live.deals, bt.deals)
    same_frames(live.orders, bt.orders)
    pd.testing.assert_frame_equal(live.curves, bt.curves)
    assert live.stats.equals(bt.stats)


def test_a_dropped_link_is_retried_and_missed_bars_are_processed_in_order(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    run = runner(port, sim, journal, max_bars=30)
    sim.fail("copy_rates_range", 8)  # the link drops on the 8th bar read from now ...
    sim.fail("copy_rates_range", 9)  # ... and again on the retry: two backoff sleeps, two hours pass
    summary = run.run()
    assert summary.reconnects == 2 and summary.missed >= 1
    reconnects = _kinds(journal, "reconnect")
    assert [r["wait_s"] for r in reconnects] == [1.0, 2.0]  # backoff doubles
    bars = [b["bar"] for b in _kinds(journal, "bar")]
    assert bars == sorted(set(bars)) and bars == list(range(bars[0], bars[0] + 30))  # none missed or twice
    opens = _kinds(journal, "open")
    assert sum(o["missed"] for o in opens) == summary.missed
    assert [o["bar"] for o in opens] == bars  # each bar decided once, in order
    # Missed bars are decided at their own open, as the backtest does: still the backtest's trades.
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)


def test_missed_bars_can_be_skipped_with_a_warning(port, sim, tmp_path, caplog):
    journal = tmp_path / "run.jsonl"
    run = runner(port, sim, journal, max_bars=20, skip_missed=True)
    sim.fail("copy_rates_range", 5)
    summary = run.run()
    assert summary.skipped >= 1 and summary.missed == 0
    skipped = [b for b in _kinds(journal, "bar") if b["skipped"]]
    assert len(skipped) == summary.skipped
    decided = {d["bar"] for d in _kinds(journal, "decision")}
    assert not decided & {b["bar"] for b in skipped}
    assert "skipped" in caplog.text
    journal_result(journal)  # the journal still rebuilds


def test_a_restart_resumes_from_the_journal_with_the_positions(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    first = runner(port, sim, journal, max_bars=25).run()
    assert len(journal_result(journal).trades) >= 1  # the first part's journal is a report already
    sim.market.advance(3 * 3600)  # the runner is down for three bars
    second = runner(port, sim, journal, max_bars=25).run()
    assert second.resumed and second.missed == 3
    assert first.bars_closed + second.bars_closed == 50
    bars = [b["bar"] for b in _kinds(journal, "bar")]
    assert bars == list(range(bars[0], bars[0] + 50))  # the restart neither repeats nor loses a bar
    assert len(_kinds(journal, "start")) == 1 and len(_kinds(journal, "resume")) == 1
    # The open position of the first part carried over: the whole journal is one backtest's run.
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)
    spanning = bt.trades[(bt.trades.entry_bar < bars[25]) & (bt.trades.exit_bar >= bars[25])]
    assert len(spanning) == 1  # SmaCrossEA is always in the market: one position crossed the restart


def test_a_journal_of_another_run_is_refused(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    runner(port, sim, journal, max_bars=2).run()
    with pytest.raises(JournalError, match=r"belongs to another run.*slow"):
        runner(port, sim, journal, params={"fast": 5, "slow": 13}, max_bars=2).run()


def test_close_on_exit_closes_and_the_default_leaves_positions(port, sim, tmp_path):
    kept = tmp_path / "kept.jsonl"
    runner(port, sim, kept, max_bars=20).run()
    assert _kinds(kept, "stop")[-1]["closed_on_exit"] == 0
    closed = tmp_path / "closed.jsonl"
    runner(port, sim, closed, max_bars=20, close_on_exit=True).run()
    assert _kinds(closed, "stop")[-1]["closed_on_exit"] == 1
    requests = _kinds(closed, "request")
    assert requests[-1]["call"] == "close"
    assert journal_result(closed).trades["exit_reason"].iloc[-1] == "signal"


class _Boom(ExpertAdvisor):
    def on_bar(self) -> None:
        if len(self.bars) > 302:
            raise KeyError("missing")


def test_an_ea_failure_names_the_bar_and_the_journal_records_the_stop(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    with pytest.raises(EARuntimeError, match=r"_Boom.on_bar raised at bar 303 \(2024-03-07 11:00"):
        runner(port, sim, journal, ea=_Boom, params={}).run()
    assert _kinds(journal, "stop")[-1]["reason"].startswith("error")


class _Interrupt(ExpertAdvisor):
    def on_bar(self) -> None:
        if len(self.bars) > 305:
            raise KeyboardInterrupt


def test_ctrl_c_stops_cleanly(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    with pytest.raises(KeyboardInterrupt):
        runner(port, sim, journal, ea=_Interrupt, params={}).run()
    assert _kinds(journal, "stop")[-1]["reason"] == "interrupted"


def test_bad_settings_are_refused(tmp_path):
    from datafeeds.timeframes import Timeframe
    from neuronet.live.runner import LiveSettings

    with pytest.raises(LiveError, match="mode"):
        LiveSettings("EURUSD", Timeframe.parse("H1"), tmp_path / "j", mode="real")
    with pytest.raises(LiveError, match=r"max_bars \(--max-bars\) must be >= 1, not 0"):
        LiveSettings("EURUSD", Timeframe.parse("H1"), tmp_path / "j", max_bars=0)
    with pytest.raises(LiveError, match="poll_s"):
        LiveSettings("EURUSD", Timeframe.parse("H1"), tmp_path / "j", poll_s=float("nan"))


class _Ticks(ExpertAdvisor):
    def on_init(self) -> None:
        self.seen: list = []

    def on_tick(self, tick) -> None:
        self.seen.append(tick)
        if len(self.seen) == 1:
            self.buy(0.1)


def test_on_tick_gets_the_quotes_inside_a_bar_and_trades_at_them(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    run = runner(
        port, sim, journal, ea=_Ticks, params={}, max_bars=3, sleep=lambda s: sim.market.advance(1200)
    )  # three looks per H1 bar
    run.run()
    ticks = _kinds(journal, "tick")
    assert len(run.ea.seen) == len(ticks) >= 4
    assert all(t.ask >= t.bid > 0 for t in run.ea.seen)
    first = ticks[0]
    deal = journal_result(journal).deals.iloc[0]  # rebuilt from the journal, ticks included
    assert deal["price"] == pytest.approx(first["ask"]) and deal["type"] == "buy"


class _Study(ExpertAdvisor):
    def on_study(self, bars) -> None:
        self.window = (bars.offset, len(bars), bars.time[-1])


def test_on_study_gets_the_backtests_study_window(port, sim, tmp_path):
    run = runner(port, sim, tmp_path / "all.jsonl", ea=_Study, params={}, max_bars=1)
    run.run()
    assert run.ea.window[:2] == (0, 300)
    last = run.ea.window[2]
    run = runner(port, sim, tmp_path / "some.jsonl", ea=_Study, params={}, max_bars=1, study_bars=120)
    run.run()
    assert run.ea.window[:2] == (180, 120) and run.ea.window[2] > last  # the clock moved on one bar


def test_the_windows_path_through_the_in_process_package(native_mt5, tmp_path):
    import sys

    from datafeeds.terminal import TerminalSource
    from datafeeds.timeframes import Timeframe
    from neuronet.live.runner import LiveRunner, LiveSettings
    from strategies.sma import SmaCrossEA

    market = sys.modules["MetaTrader5.market"]
    market.set_now("2024-03-07 10:00")
    try:
        journal = tmp_path / "run.jsonl"
        source = TerminalSource(retries=0)
        settings = LiveSettings("EURUSD", Timeframe.H1, journal, history_bars=300, max_bars=30)
        LiveRunner(
            SmaCrossEA, {"fast": 5, "slow": 12}, source, settings, sleep=lambda s: market.advance(3600)
        ).run()
        assert source.where == "local"
        source.close()
    finally:
        market.set_now(None)
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)


class _FakeTerminalTrade:
    """What ``--live`` gives the runner: a trade context of the terminal (here a stub that records)."""

    point = 1e-5

    def __init__(self, link, symbol, magic, record, *, market):
        self.symbol, self.magic, self.record, self.last_retcode = symbol, magic, record, 0
        self.sent: list = []
        assert hasattr(link, "call")  # the source's connected link

    def order(self, side, lots, sl, tp, magic, comment):
        self.sent.append((side, lots))
        self.record({"action": 1, "type": 0 if side > 0 else 1, "volume": lots, "comment": "nn-1"})
        self.last_retcode = 10009
        self.record({"retcode": 10009, "order": len(self.sent)})
        return len(self.sent)

    def close(self, ticket, magic, lots=None, reason="signal"):
        return 0

    def positions(self):
        return []

    def account(self):
        from strategies.trade import Account

        return Account(10_000.0, 10_000.0, 0.0, 10_000.0, 100.0, "USD")

    def price(self, side):
        return 1.1

    def day_pnl(self, day=None):
        from neuronet.live.day_pnl import DayPnl

        return DayPnl(0.0)


def test_a_live_account_run_journals_the_terminals_records_and_resumes(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    made: list = []

    def factory(*args, **kw):
        made.append(_FakeTerminalTrade(*args, **kw))
        return made[-1]

    from datafeeds.terminal import TerminalSource
    from datafeeds.timeframes import Timeframe
    from neuronet.live.runner import LiveRunner, LiveSettings

    def run(bars):
        source = TerminalSource("127.0.0.1", port, retries=0)
        settings = LiveSettings("EURUSD", Timeframe.H1, journal, mode="live", history_bars=300, max_bars=bars)
        lines: list[str] = []
        LiveRunner(
            SmaCrossEA, LIVE_PARAMS, source, settings, trading=factory, sleep=sim.sleep, status=lines.append
        ).run()
        source.close()
        return lines

    lines = run(30)
    assert made[0].magic == MAGIC and made[0].sent
    assert "equity 10000.00" in lines[0]
    terminal = [r for r in read_journal(journal) if r.get("source") == "terminal"]
    assert {r["type"] for r in terminal} == {"request", "result"}
    assert {r["terminal"]["type"] for r in terminal if r["type"] == "request"} <= {0, 1}  # its own keys
    run(5)
    assert len(_kinds(journal, "resume")) == 1
    with pytest.raises(JournalError, match="'live' run"):
        journal_result(journal)
    with pytest.raises(LiveError, match="trade context factory"):
        LiveRunner(SmaCrossEA, PARAMS, None, LiveSettings("EURUSD", Timeframe.H1, journal, mode="live"))


def test_a_journal_of_other_account_settings_is_refused(port, sim, tmp_path):
    from backtests import AccountConfig

    journal = tmp_path / "run.jsonl"
    runner(port, sim, journal, max_bars=2).run()
    with pytest.raises(JournalError, match="other account settings"):
        runner(port, sim, journal, max_bars=2, account=AccountConfig(spread=5)).run()


@pytest.mark.slow
def test_a_trained_network_ea_trades_live_as_in_the_backtest(native_mt5, tmp_path):
    import sys

    from datafeeds.terminal import TerminalSource
    from datafeeds.timeframes import Timeframe
    from neuronet.live.runner import LiveRunner, LiveSettings
    from strategies.fractal import FractalEA

    market = sys.modules["MetaTrader5.market"]
    market.set_now("2024-03-07 10:00")
    params = {"epochs": 2, "backend": "numpy", "seed": 0}
    journal = tmp_path / "run.jsonl"
    try:
        source = TerminalSource(retries=0)
        settings = LiveSettings("EURUSD", Timeframe.H1, journal, history_bars=1500, max_bars=40)
        LiveRunner(FractalEA, params, source, settings, sleep=lambda s: market.advance(3600)).run()
        source.close()
    finally:
        market.set_now(None)
    bt, _ = backtest_of(journal, FractalEA, params)
    assert len(bt.trades) >= 1
    same_frames(journal_result(journal).trades, bt.trades)


class _Retrains(ExpertAdvisor):
    retrain_every = 7

    def on_init(self) -> None:
        self.studies: list = []

    def on_study(self, bars) -> None:
        self.studies.append((bars.offset, bars.end))


def test_retraining_every_n_bars_follows_the_backtest_and_survives_a_restart(port, sim, tmp_path):
    from backtests import AccountConfig, Backtest
    from neuronet.live.journal import read_journal as _read
    from neuronet.live.rebuild import read_state

    journal = tmp_path / "run.jsonl"
    run = runner(port, sim, journal, ea=_Retrains, params={}, max_bars=25)
    run.run()
    assert run.ea.studies == [(0, 300), (0, 307), (0, 314), (0, 321)]
    state = read_state(str(journal), _read(journal))
    bt = Backtest(state.bars, _Retrains, account=AccountConfig(), forward=state.bars.index[300]).run()
    assert bt.ea_instance.studies == run.ea.studies
    again = runner(port, sim, journal, ea=_Retrains, params={}, max_bars=5)
    again.run()  # resumed before bar 325: trained as the run was (at 321), then again at 328
    assert again.ea.studies == [(0, 321), (0, 328)]
