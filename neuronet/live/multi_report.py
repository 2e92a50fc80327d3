"""``neuronet live report`` of a multi-symbol paper run: its account rebuilt from the journal and scored
as the backtest scores a multi-symbol run (``backtests.multi_replay``).

The journal's bars and requests are replayed on the backtest's multi-symbol account (``multi_paper``), each
request made again and checked against the answer journaled (``multi_resume.replay``); positions still open
at the last bar are closed at its close in the report only ("end of test" deals, every symbol moved to its
close first, as the backtest does). The trades, deals and orders carry their symbol, and the report's data
holds the per-symbol table (trades, net profit, profit factor, win rate, largest loss).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from backtests.broker import AccountConfig
from backtests.multi import symbol_table
from backtests.multi_replay import symbol_chart
from backtests.replay import Result
from datafeeds.candles import CandleMeta, meta_of
from neuronet.live.context import LiveBars
from neuronet.live.errors import JournalError
from neuronet.live.journal import JournalRecords
from neuronet.live.multi_paper import Closed, MultiPaper, Quote
from neuronet.live.multi_resume import read_multi, replay
from neuronet.live.multi_views import LiveViews
from neuronet.live.rebuild import JournalState


def is_multi(start: dict) -> bool:
    """A journal of a multi-symbol or multi-timeframe run."""
    return len(start.get("symbols") or ()) > 1 or len(start.get("timeframes") or ()) > 1


class _Book:
    """The journal's bars and paper account, brought to its end by ``multi_resume.replay`` (what a
    resumed runner does, without an EA or a terminal)."""

    def __init__(self, frames: dict, main: tuple[str, str], specs: dict, account: AccountConfig):
        hist = frames[main]
        self.views = LiveViews(frames, main, LiveBars(hist, meta_of(hist)).feed)
        self.main = main
        symbols = [name for name, tf in frames if tf == main[1]]
        self.paper = MultiPaper({name: frames[(name, main[1])] for name in symbols}, specs, account)
        self.t = len(hist)
        self.forming: tuple[int, pd.Timestamp] | None = None

    def open_bar(self, t: int, when: pd.Timestamp, quotes: dict[str, Quote | None]) -> None:
        self.paper.open_bar(when, quotes)
        self.forming = (t, when)

    def close_bar(self, t: int, closed: dict[str, Closed | None], new: dict) -> None:
        self.paper.close_bar(t, closed)
        for key, frame in new.items():
            if len(frame):
                self.views.append(key, frame)
        self.forming = None
        self.t = t + 1


def multi_result(path: str | Path, records: JournalRecords, result_of) -> Result:
    """The report's ``Result`` of the multi-symbol journal at ``path`` (``result_of``: ``report._result``,
    the one-symbol report's scoring, given the main symbol's broker: the account's ledger is shared)."""
    path = Path(path)
    start = records.start
    if start.get("mode") != "paper":
        raise JournalError(
            f"journal {path}: the report of a multi-symbol live account is not made yet; the journal holds "
            "every request with its symbol and the terminal's answers"
        )
    state = read_multi(path, records)
    main = (str(start["symbol"]), str(start["timeframe"]))
    book = _Book(state.frames, main, state.specs, AccountConfig(**start["account"]))
    replay(book, state.events, path)
    if book.forming is not None:  # decided, not closed: the report ends at the last closed bar
        raise JournalError(
            f"journal {path}: it ends inside bar {book.forming[0]}; resume the run to close it, then report"
        )
    fs = int(start["forward_start"])
    last = book.t - 1
    if last < fs:
        raise JournalError(f"journal {path}: the run stopped before its first live bar")
    brokers = book.paper.brokers
    for broker in brokers.values():
        broker.to_close(last)
    for broker in brokers.values():
        broker.finish(last)
    meta = CandleMeta.from_dict(start["meta"])
    one = JournalState(str(path), start, meta, state.frames[main], fs, stopped=state.stopped)
    extra = {"model": "live", "model_name": "Live paper trading (terminal quotes, backtest fill rules)"}
    result = result_of(path, one, brokers[main[0]], AccountConfig(**start["account"]), extra)
    table = symbol_table(result.trades, list(brokers))
    lacked = book.paper.lacked()
    result.data["symbols"] = {
        name: {**figures, "lacked_bars": lacked[name]} for name, figures in table.items()
    }
    result.data["timeframes"] = list(start.get("timeframes") or ())
    result.symbol_charts = {name: symbol_chart(broker, fs, last) for name, broker in brokers.items()}
    return result
