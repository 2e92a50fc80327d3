"""``neuronet live report JOURNAL``: the backtest's report (``backtests.report``) from a paper run's journal.

The paper account is rebuilt from the journal (``rebuild``), and scored exactly as a backtest is
(``backtests.replay.broker_figures``) over the live bars: the first forward bar is the first bar the run
decided on. Positions still open at the journal's last bar are closed at its close in the report, as a
backtest's "end of test" deals are (the account itself is not touched), so a paper run and a backtest of
the same bars give the same report.
"""

from __future__ import annotations

from pathlib import Path

from backtests.periods import Periods
from backtests.replay import Result, broker_figures, chart_data
from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.rebuild import read_state
from strategies.bars import BarFeed


def journal_result(path: str | Path) -> Result:
    """A ``backtests.replay.Result`` of the paper run journaled in ``path``."""
    records = read_journal(path)
    if not records:
        raise JournalError(f"journal {path} is empty")
    start = records[0]
    if start.get("mode") != "paper":
        raise JournalError(
            f"journal {path} is of a {start.get('mode')!r} run; reports are made from paper journals "
            "(a live account's figures are in the terminal's own history)")
    state = read_state(str(path), records)
    broker, fs = state.broker, state.forward_start
    last = len(broker.opens) - 1
    if last < fs:
        raise JournalError(f"journal {path}: the run stopped before its first live bar")
    broker.finish(last)
    trades, curves, stats, balance, equity = broker_figures(broker, fs, last, broker.config)
    index = broker.time
    cols = {"open": broker.opens, "high": broker.highs, "low": broker.lows, "close": broker.closes}
    zeros = broker.opens * 0.0
    feed = BarFeed({**cols, "tick_volume": zeros, "spread": broker.spread / broker.point,
                    "real_volume": zeros}, index, state.meta, last + 1)
    stopped = state.stopped or {}
    return Result(
        ea={"class": start["ea"], "params": start["params"]},
        data={
            **state.meta.to_dict(),
            "bars": last + 1,
            "first": str(index[0]),
            "last": str(index[last]),
            "forward_first": str(index[fs]),
            "forward_last": str(index[last]),
            "model": "live",
            "model_name": "Live paper trading (terminal quotes, backtest fill rules)",
            "history_quality": None,
            "journal": str(path),
        },
        account=broker.config.to_dict(),
        periods=Periods(last + 1, fs, int(start.get("study_bars") or 0)).to_dict(),
        trades=trades,
        time=index[fs : last + 1],
        balance=balance,
        equity=equity,
        stats=stats,
        predictions=None,
        training=[],
        timings={},
        rejected=list(broker.rejected),
        complete=stopped.get("reason") == "max_bars",
        seed=0,
        chart_data=chart_data(feed, None, fs, last),
        orders=broker.orders_frame(),
        deals=broker.deals_frame(),
        curves=curves,
        interrupted=None if stopped.get("reason") in (None, "max_bars") else str(stopped.get("reason")),
    )
