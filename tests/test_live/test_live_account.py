"""``--live`` end to end: the runner trading through ``TerminalTrade`` on the simulated terminal behind a real
RPyC server, on bars that close as the test moves the terminal's clock.

The paper run of the same bars is the reference: the terminal fills at the quote of the bar's open, as the
paper broker does, so both runs must open and close the same positions at the same prices.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_live.conftest import START
from test_live.live_support import LIVE_PARAMS, MAGIC, backtest_of, runner

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.runner import LiveRunner, LiveSettings
from neuronet.live.terminal_trade import TerminalTrade
from strategies.sma import SmaCrossEA

BARS = 60


def _live_run(port: int, sim, journal: Path, limits: Limits) -> list[str]:
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)

    def factory(src, symbol, magic, record, *, market):
        return TerminalTrade(src, symbol, magic=magic, limits=limits, record=record, market=market)

    settings = LiveSettings("EURUSD", Timeframe.H1, journal, mode="live", history_bars=300, max_bars=BARS)
    lines: list[str] = []
    try:
        LiveRunner(
            SmaCrossEA, LIVE_PARAMS, source, settings, trading=factory, sleep=sim.sleep, status=lines.append
        ).run()
    finally:
        source.close()
    return lines


def _terminal_deals(sim) -> list[dict]:
    mt5 = sim.conn.modules.MetaTrader5
    deals = mt5.history_deals_get(0, 2**31 - 1) or ()  # remote records: read field by field
    return [
        {"entry": int(d.entry), "type": int(d.type), "volume": float(d.volume), "price": float(d.price)}
        for d in deals
        if int(d.magic) == MAGIC
    ]


def test_a_live_run_trades_on_the_terminal_as_the_paper_run_does(port, sim, tmp_path):
    limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=5_000.0, symbols=("EURUSD",))
    live_lines = _live_run(port, sim, tmp_path / "live.jsonl", limits)
    assert len(live_lines) == BARS
    deals = _terminal_deals(sim)
    results = [r for r in read_journal(tmp_path / "live.jsonl") if r["type"] == "result"]
    assert deals and all(r.get("retcode") in (None, 10009) for r in results if r.get("source") == "terminal")

    # The same bars on paper, from the same terminal state.
    sim.state.reset()
    sim.market.set_now(START)
    runner(port, sim, tmp_path / "paper.jsonl", max_bars=BARS).run()
    paper, _ = backtest_of(tmp_path / "paper.jsonl")
    opened = [d for d in deals if d["entry"] == 0]
    assert len(opened) == len(paper.trades)
    assert [d["price"] for d in opened] == pytest.approx(list(paper.trades["entry_price"]), abs=1e-9)


def test_a_live_run_stops_opening_at_the_position_limit(port, sim, tmp_path):
    limits = Limits(max_lots=0.01, max_positions=1, max_daily_loss=5_000.0, symbols=("EURUSD",))
    _live_run(port, sim, tmp_path / "live.jsonl", limits)
    records = read_journal(tmp_path / "live.jsonl")
    # SmaCrossEA trades 0.1 lots: every opening request is refused by the lot limit before order_send.
    assert not [d for d in _terminal_deals(sim) if d["entry"] == 0]
    refused = [r for r in records if r["type"] == "result" and r.get("retcode") == 10027]
    assert refused
