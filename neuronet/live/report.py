"""``neuronet live report JOURNAL``: the backtest's report (``backtests.report``) from a run's journal.

A paper run's account is rebuilt from the journal (``rebuild``) and scored exactly as a backtest is
(``backtests.replay.broker_figures``) over the live bars: the first forward bar is the first bar the run
decided on. Positions still open at the journal's last bar are closed at its close in the report, as a
backtest's "end of test" deals are (the account itself is not touched), so a paper run and a backtest of
the same bars give the same report.

A live account's figures are the terminal's: its deals and orders over the run's span, booked into the
backtest's ledger (``account_report``, ``terminal_ledger``) and scored by the same ``broker_figures``;
``terminal`` (a ``datafeeds.terminal.TerminalSource``) must then reach the terminal the run traded on.
Positions it still holds are closed at the last bar's close in the report only, as a paper run's are.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from backtests.broker import AccountConfig, Broker
from backtests.periods import Periods
from backtests.replay import Result, broker_figures, chart_data
from neuronet.live.account_report import terminal_ledger
from neuronet.live.errors import JournalError
from neuronet.live.journal import JournalRecords
from neuronet.live.multi_report import is_multi, multi_result
from neuronet.live.rebuild import JournalState, read_state
from neuronet.live.refused import refused
from strategies.bars import BarFeed


def journal_result(path: str | Path, terminal: Any = None) -> Result:
    """A ``backtests.replay.Result`` of the run journaled in ``path`` (``terminal``: see the docstring)."""
    records = JournalRecords(path)  # read afresh at each pass over it, a record at a time
    start = records.start
    mode = start.get("mode")
    if mode not in ("paper", "live"):
        raise JournalError(f"journal {path}: unknown mode {mode!r}")
    if mode == "live" and terminal is None:
        raise JournalError(
            f"journal {path} is of a 'live' run: its report is made from the terminal's deal history; give "
            "the terminal's address (-o host=... -o port=...) as for 'neuronet live'"
        )
    if is_multi(start):
        return multi_result(path, records, _result, terminal)
    state = read_state(str(path), records)
    last = len(state.bars) - 1
    if last < state.forward_start:
        raise JournalError(f"journal {path}: the run stopped before its first live bar")
    if mode == "paper":
        broker = state.broker
        broker.finish(last)
        extra = {"model": "live", "model_name": "Live paper trading (terminal quotes, backtest fill rules)"}
        return _result(path, state, broker, broker.config, extra)
    ledger, config, who = terminal_ledger(str(path), records, state, terminal)
    ledger.finish(last)
    extra = {
        "model": "live account",
        "model_name": "Live account (the terminal's deals and orders)",
        "magic": sorted(who.magics),
        "open_positions": ledger.held_at_end,
    }
    ledger.broker.rejected.extend(refused(records))
    return _result(path, state, ledger.broker, config, extra)


def _result(
    path: str | Path,
    state: JournalState,
    broker: Broker,
    config: AccountConfig,
    extra: dict,
    equity_path: Callable | bool = True,
) -> Result:
    """The report's ``Result`` of a finished ``broker`` (a paper account or a terminal's ledger; the main
    symbol's broker of an account of several, with ``equity_path``: the account's path of every symbol,
    ``account_path.account_drawdowns``)."""
    start, fs = state.start, state.forward_start
    last = len(broker.opens) - 1
    trades, curves, stats, balance, equity, equity_path = broker_figures(
        broker, fs, last, config, equity_path
    )
    index = broker.time
    cols = {"open": broker.opens, "high": broker.highs, "low": broker.lows, "close": broker.closes}
    zeros = broker.opens * 0.0
    feed = BarFeed(
        {**cols, "tick_volume": zeros, "spread": broker.spread / broker.point, "real_volume": zeros},
        index,
        state.meta,
        last + 1,
    )
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
            **extra,
            "history_quality": None,
            "journal": str(path),
        },
        account=config.to_dict(),
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
        equity_path=equity_path,
        interrupted=None if stopped.get("reason") in (None, "max_bars") else str(stopped.get("reason")),
    )
