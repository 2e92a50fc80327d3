"""``neuronet live report`` of a multi-symbol run: its account scored as the backtest scores a
multi-symbol run (``backtests.multi_replay``), rebuilt from the journal on paper, booked from the terminal's
deals on a live account.

The journal's bars and requests are replayed on the backtest's multi-symbol account (``multi_paper``), each
request made again and checked against the answer journaled (``multi_resume.replay``); positions still open
at the last bar are closed at its close in the report only ("end of test" deals, every symbol moved to its
close first, as the backtest does). The trades, deals and orders carry their symbol, and the report's data
holds the per-symbol table (trades, net profit, profit factor, win rate, largest loss).

A live account's report has the same bars (the journal's, replayed without its requests: the terminal made
the trades) and the terminal's money: its deals and orders of the run's symbols and magic numbers over the
run's span (``account_report``), each symbol's booked into that symbol's broker of one account
(``terminal_ledger``), every deal's profit, commission, fee and swap as the terminal booked them in the
account currency. Positions it still holds are closed at the last bar's close in the report only, every
symbol moved to its close first, as on paper.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from backtests.account_path import account_drawdowns
from backtests.broker import AccountConfig
from backtests.multi import symbol_table
from backtests.multi_replay import symbol_chart
from backtests.replay import Result
from datafeeds.candles import CandleMeta, meta_of
from neuronet.live.account_report import (
    check_login,
    journaled_deals,
    run_history,
    run_identity,
    run_span,
    scored_config,
    stop_changes,
)
from neuronet.live.context import LiveBars
from neuronet.live.errors import JournalError
from neuronet.live.journal import JournalRecords
from neuronet.live.multi_paper import Closed, MultiPaper, Quote
from neuronet.live.multi_resume import read_multi, replay
from neuronet.live.multi_views import LiveViews
from neuronet.live.owned import owned_in
from neuronet.live.rebuild import JournalState
from neuronet.live.refused import refused
from neuronet.live.terminal_ledger import TerminalLedger


def is_multi(start: dict) -> bool:
    """A journal of a multi-symbol or multi-timeframe run."""
    return len(start.get("symbols") or ()) > 1 or len(start.get("timeframes") or ()) > 1


class _Book:
    """The journal's bars and account, brought to its end by ``multi_resume.replay`` (what a resumed
    runner does, without an EA or a terminal). ``trade``: the journal's requests are made again on the
    paper account (a paper run); without, only its bars are (a live account's: the terminal traded)."""

    def __init__(
        self, frames: dict, main: tuple[str, str], specs: dict, account: AccountConfig, *, trade: bool = True
    ):
        hist = frames[main]
        self.views = LiveViews(frames, main, LiveBars(hist, meta_of(hist)).feed)
        self.main = main
        symbols = [name for name, tf in frames if tf == main[1]]
        self.market = MultiPaper({name: frames[(name, main[1])] for name in symbols}, specs, account)
        self.paper = self.market if trade else None  # ``replay`` makes the requests again on it
        self.t = len(hist)
        self.forming: tuple[int, pd.Timestamp] | None = None

    def open_bar(self, t: int, when: pd.Timestamp, quotes: dict[str, Quote | None]) -> None:
        self.market.open_bar(when, quotes)
        self.forming = (t, when)

    def close_bar(self, t: int, closed: dict[str, Closed | None], new: dict) -> None:
        self.market.close_bar(t, closed)
        for key, frame in new.items():
            if len(frame):
                self.views.append(key, frame)
        self.forming = None
        self.t = t + 1


def multi_result(path: str | Path, records: JournalRecords, result_of, terminal: Any = None) -> Result:
    """The report's ``Result`` of the multi-symbol journal at ``path`` (``result_of``: ``report._result``,
    the one-symbol report's scoring, given the main symbol's broker: the account's ledger is shared;
    ``terminal``: a live account's, as for ``report.journal_result``)."""
    path = Path(path)
    start = records.start
    live = start.get("mode") == "live"
    state = read_multi(path, records)
    main = (str(start["symbol"]), str(start["timeframe"]))
    who = config = None
    if live:
        who = run_identity(str(path), records)
        check_login(str(path), who, terminal)
        config = scored_config(str(path), start, who)
    else:
        config = AccountConfig(**start["account"])
    book = _Book(state.frames, main, state.specs, config, trade=not live)
    events = state.events
    if live:  # the terminal made the trades: a bar decided on and not closed is in the span, not the bars
        ends = [i for i, rec in enumerate(events) if rec["type"] == "bar"]
        events = events[: ends[-1] + 1] if ends else []
    replay(book, events, path)
    if book.forming is not None:  # decided, not closed: the report ends at the last closed bar
        raise JournalError(
            f"journal {path}: it ends inside bar {book.forming[0]}; resume the run to close it, then report"
        )
    fs = int(start["forward_start"])
    last = book.t - 1
    if last < fs:
        raise JournalError(f"journal {path}: the run stopped before its first live bar")
    brokers = book.market.brokers
    meta = CandleMeta.from_dict(start["meta"])
    extra = {"model": "live", "model_name": "Live paper trading (terminal quotes, backtest fill rules)"}
    if live:
        extra = _book_terminal(path, records, terminal, who, brokers, brokers[main[0]].time, fs, meta)
    for broker in brokers.values():
        broker.to_close(last)
    for broker in brokers.values():
        broker.finish(last)
    one = JournalState(str(path), start, meta, state.frames[main], fs, stopped=state.stopped)
    # The account's equity path, every symbol at its own prices (one symbol's would price them all at its).
    result = result_of(path, one, brokers[main[0]], config, extra, account_drawdowns)
    table = symbol_table(result.trades, list(brokers))
    lacked = book.market.lacked()
    result.data["symbols"] = {
        name: {**figures, "lacked_bars": lacked[name]} for name, figures in table.items()
    }
    result.data["timeframes"] = list(start.get("timeframes") or ())
    result.symbol_charts = {name: symbol_chart(broker, fs, last) for name, broker in brokers.items()}
    return result


def _book_terminal(
    path: Path,
    records: JournalRecords,
    terminal: Any,
    who: Any,
    brokers: dict,
    times: Any,
    fs: int,
    meta: Any,
) -> dict:
    """Book the terminal's deals and orders of each symbol into its broker of the account (the positions
    it still holds handed over for the report's "end of test" close); the report's data about it."""
    span = run_span(times, fs, meta)
    made, owned = journaled_deals(records), owned_in(records, str(path))
    history = run_history(terminal, who, list(brokers), span, str(path), made, owned)
    stops = stop_changes(str(path), records)
    ledgers = {name: TerminalLedger(broker, meta.clock) for name, broker in brokers.items()}
    for name, ledger in ledgers.items():
        ledger.carry(history[name].carried)
    TerminalLedger.book_account(
        {name: (ledger, history[name].deals, history[name].orders) for name, ledger in ledgers.items()},
        fs,
        stops,
    )
    for ledger in ledgers.values():
        ledger.hand_over()
    main = next(iter(brokers.values()))
    main.rejected.extend(refused(records))
    return {
        "model": "live account",
        "model_name": "Live account (the terminal's deals and orders)",
        "magic": sorted(who.magics),
        "open_positions": sum(ledger.held_at_end for ledger in ledgers.values()),
    }
