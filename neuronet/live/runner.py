"""The live lifecycle: an expert advisor on bars as a MetaTrader 5 terminal closes them.

As in the backtest: ``on_init``; ``on_study`` on the study window before the first live bar (the bars the
terminal held at the start, or the last ``study_bars`` of them); ``on_bar`` each time a bar closes, with the
closed bars in ``self.bars`` and orders filled at the prices of the bar now forming; ``on_tick`` on every
new quote where the EA overrides it; ``on_deinit`` at the stop.

A bar's close is read from the terminal's rates in broker time (``TerminalSource.fetch``: every bar
before the one forming is final), never from the local clock. When the terminal or the bridge drops, the
runner waits ``backoff_s``, then twice that, up to ``backoff_max_s``, and tries again; the bars that closed
meanwhile are then processed in order (``on_bar`` at each one's own open) or, with ``skip_missed``,
journaled and skipped with a warning — never twice, and never out of order.

Every bar, decision, trade request and result goes to the journal (``journal``). Started again with the
same journal, the run resumes after the last bar it processed (a bar whose ``on_bar`` the stop cut short
is decided again, what it had sent answered from the journal: ``answers``), with its paper account rebuilt
from the journal (``rebuild``); on a live account the terminal holds the positions, found by the EA's
magic number, and a daily loss halt journaled on the same server day holds again
(``TerminalTrade.restore_halt``). A live
run journals its account at the start (``account``: the magic number and balance ``neuronet live report``
scores it with), and once the terminal answers again after a drop, the requests whose reply was lost are
looked up (``TerminalTrade.resolve``) before the EA decides anything more.

The loop, the retries after a drop, the lost-reply look-ups, the decision and the stop are the engine's
(``engine.LiveEngine``), shared with the multi-symbol runner: this runner makes one and is its part
(``engine.Chart``), holding what is one symbol's. The engine gives it, once (``attach``), the state both share
(``shared_state.SharedState``: the settings, the journal, the bars, the EA, its context, the bar forming)
and what the engine does for it (``shared_state.Lifecycle``: the retries, a decision, a study); the part
reaches the engine through nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from backtests.broker import AccountConfig
from backtests.periods import Periods
from datafeeds.candles import CandleMeta, meta_of
from datafeeds.terminal import TerminalSource
from neuronet.live.context import LiveBars, LiveContext
from neuronet.live.engine import LiveEngine
from neuronet.live.errors import JournalError, LiveError
from neuronet.live.journal import JournalRecords, json_ready
from neuronet.live.paper import PaperBroker
from neuronet.live.quotes import QuoteBounds, QuoteError, checked_tick
from neuronet.live.rebuild import JournalState, bar_record, history_record, read_state
from neuronet.live.shared_state import Lifecycle, LiveSettings, LiveSummary, SharedField, SharedState
from neuronet.live.status import StatusLine
from strategies.base import ExpertAdvisor, call_hook, make_ea
from strategies.trade import Tick

__all__ = ["LiveRunner", "LiveSettings", "LiveSummary"]

log = logging.getLogger(__name__)


class LiveRunner:
    """Run ``ea_class(**params)`` live on one symbol (see the module docstring): the one-symbol ``Chart``
    of a ``LiveEngine`` it makes and runs (``_engine``), which
    attaches it (``attach``).

    ``trading``, ``sleep``: as ``LiveEngine``'s.
    ``status``: where the one line per bar goes (default: the log).
    """

    s = SharedField("settings")  # the shared state's settings, summary, EA and trade context, for callers
    summary = SharedField("summary")
    ea = SharedField("ea")
    ctx = SharedField("ctx")

    def __init__(
        self,
        ea_class: type[ExpertAdvisor],
        params: dict[str, Any],
        source: TerminalSource,
        settings: LiveSettings,
        *,
        trading: Callable[..., Any] | None = None,
        sleep: Callable[[float], None] | None = None,
        status: Callable[[str], None] | None = None,
    ):
        self._status = StatusLine(status or log.info, settings.symbol, settings.timeframe.name)
        # Given by the engine (``attach``), while it is made here:
        self.shared: SharedState | None = None
        self.lifecycle: Lifecycle | None = None
        self._engine = LiveEngine(self, ea_class, params, source, settings, trading=trading, sleep=sleep)
        # Set when the run starts (``begin``), fresh or from the journal:
        self.meta: CandleMeta | None = None  # the bars' symbol, digits and broker clock
        self.fs = 0  # the first live bar (the history's length)
        self.broker: PaperBroker | None = None  # the paper account (None on a live account)
        self._last_quote: tuple[float, float] | None = None  # the last quote on_tick saw

    def attach(self, shared: SharedState, lifecycle: Lifecycle) -> None:
        self.shared, self.lifecycle = shared, lifecycle

    def run(self) -> LiveSummary:
        """Run until ``max_bars`` bars closed or Ctrl-C (``LiveEngine.run``)."""
        return self._engine.run()

    def fetch_main(self, after: pd.Timestamp | None):
        run = self.shared
        start = None if after is None else after + pd.Timedelta(seconds=1)
        s = run.settings
        fetched = self.lifecycle.retrying(
            "reading bars", lambda: run.source.fetch(s.symbol, s.timeframe, start)
        )
        run.market_bar = fetched.final_until
        return fetched

    def quote_bounds(self) -> QuoteBounds | None:
        """What a quote is checked against now (``quotes.QuoteBounds``): the bar the terminal is forming
        as last read, and the price band of the closed bars; None before the first bars are known."""
        run = self.shared
        if run.market_bar is None or run.bars is None or not len(run.bars.feed):
            return None
        feed = run.bars.feed
        return QuoteBounds.of(
            feed.column("high"),
            feed.column("low"),
            feed.column("close")[-1],
            run.market_bar,
            run.settings.timeframe.seconds,
        )

    def _tick(self, bar_open: pd.Timestamp) -> tuple[pd.Timestamp, float, float]:
        """The terminal's quote for the bar opened at ``bar_open``, checked (``quotes.checked_tick``): one
        that is missing, not a price, crossed, at a time far from that bar (on paper, older than its open
        by more than ``max_quote_age``) or at prices far from the recent bars is a ``QuoteError``."""
        run = self.shared
        s = run.settings
        bounds, retrying = self.quote_bounds(), self.lifecycle.retrying
        return checked_tick(
            run.source, s.symbol, bar_open, s.timeframe.seconds, bounds, retrying, s.fill_age()
        )

    # -- the start -------------------------------------------------------------------------------------------
    def read_journal(self, path: Path, records: JournalRecords) -> JournalState:
        """The state to resume from, read a record at a time; a journal of another run is refused."""
        start, s = records.start, self.shared.settings
        mine = {
            "ea": self.shared.ea_class.__name__,
            "params": json_ready(self._params()),
            "symbol": s.symbol,
            "timeframe": s.timeframe.name,
            "mode": s.mode,
        }
        theirs = {k: json_ready(start.get(k)) for k in mine}
        if theirs != mine:
            diff = ", ".join(f"{k} {theirs[k]!r} here {mine[k]!r}" for k in mine if theirs[k] != mine[k])
            raise JournalError(f"journal {path} belongs to another run ({diff}); give a new --journal")
        state = read_state(str(path), records)
        if AccountConfig(**start["account"]) != s.account:
            raise JournalError(
                f"journal {path} was written with other account settings; give a new --journal"
            )
        return state

    def _params(self) -> dict:
        return self.shared.ea_class.resolve_params(self.shared.params)

    def begin(self, state: JournalState | None) -> None:
        run = self.shared
        s = run.settings
        if state is None:
            fetched = self.fetch_main(None)
            hist = fetched.frame
            if s.history_bars:
                hist = hist.iloc[-s.history_bars :]
            if len(hist) < 2:
                raise LiveError(
                    f"the terminal has {len(hist)} closed {s.symbol} {s.timeframe.name} bars; "
                    "a live run needs history to start from"
                )
            self.meta = meta_of(fetched.frame)
            self.fs = len(hist)
            start = {
                "ea": run.ea_class.__name__,
                "params": self._params(),
                "symbol": s.symbol,
                "timeframe": s.timeframe.name,
                "mode": s.mode,
                "meta": self.meta.to_dict(),
                "account": asdict(s.account),
                "forward_start": self.fs,
                "study_bars": s.study_bars,
                "started": pd.Timestamp.now(tz="UTC"),
            }
            # Together: a history too long to be read back leaves no journal that cannot be resumed.
            run.journal.write_all(("start", start), ("history", history_record(hist)))
            run.begun = True
            self.broker = PaperBroker(hist, self.meta.point, s.account) if s.mode == "paper" else None
            run.forming, run.decided = None, set()
            first_open = fetched.final_until
        else:
            run.summary.resumed = True
            hist, self.meta, self.fs = state.bars, state.meta, state.forward_start
            self.broker, run.forming, run.decided = state.broker, state.forming, state.decided
            run.journal.write(
                "resume",
                after_bar=len(hist) - 1,
                forming=None if run.forming is None else run.forming[0],
                at=pd.Timestamp.now(tz="UTC"),
            )
            run.begun = True
            log.info("resuming %s after bar %d (%s)", s.journal, len(hist) - 1, hist.index[-1])
        run.bars = LiveBars(hist, self.meta)
        run.ea = make_ea(run.ea_class, run.params)
        # The backtest's retraining rule over the live bars (the history is the study period).
        run.periods = Periods(len(hist), self.fs, s.study_bars).for_ea(int(run.ea.retrain_every))
        trading = self.broker
        if trading is None:
            self.lifecycle.retrying("connecting", run.source.link)  # fail early, with backoff, if it is down
            # The source, not the raw link: its ``call`` reconnects after a drop (``TerminalSource.call``).
            trading = run.trading_factory(
                run.source,
                s.symbol,
                run.ea.magic,
                self.lifecycle.record_trade,
                market=self.quote_bounds,
            )
            if state is not None and state.halted_day is not None:
                trading.restore_halt(state.halted_day)  # a restart does not lift the day's halt
            if state is not None and state.unresolved:
                trading.restore_unresolved(state.unresolved)  # looked up, counted open, never sent again
            if state is not None and state.magics:
                trading.restore_magics(state.magics)  # its positions of every number it used stay its
            if state is not None and state.owned:
                trading.restore_owned(state.owned.values())  # their owners known without the deal history
            self.lifecycle.journal_account(trading.account)
        run.ctx = LiveContext(trading, run.bars, run.journal.write, run.now, run.bar)
        run.ea.attach(run.ctx, run.bars.feed.bars)
        call_hook(run.ea, "on_init", where="before the first live bar")
        upcoming = len(run.bars.feed)  # the next bar to decide on (a resumed run is past fs)
        at = run.periods.last_training(upcoming - 1)  # resumed: the latest retraining, as the run had it
        self.lifecycle.study(at, run.bars.feed.time[at - 1])
        run.started = True
        if state is None:
            self.open_new(first_open)
        elif run.forming is not None and run.forming[0] not in run.decided:
            # Cut short by the stop in the middle of a bar: decided again, each request already journaled
            # for it answered from the journal (``answers``), so only what was not sent is sent. A bar
            # that has closed since is decided late: on a live account its requests are then refused.
            log.warning(
                "on_bar at bar %d was cut short by the stop: run again, %d request(s) it had made are not "
                "sent again",
                run.forming[0],
                len(state.again),
            )
            fetched = self.fetch_main(run.bars.feed.time[-1])
            run.ctx.answers.start(state.again)
            self.lifecycle.decide(*run.forming, missed=fetched.final_until > run.forming[1])

    def terminal(self) -> Any:
        """The live account's trade context (``TerminalTrade``); None on paper or before the EA starts."""
        return None if self.broker is not None or self.shared.ctx is None else self.shared.ctx.trading

    def show(self, when: pd.Timestamp) -> None:
        self.shared.bars.show(self.shared.ea)

    def positions(self) -> dict:
        return {"position": sum(p.side * p.lots for p in self.shared.ctx.positions())}

    # -- bars ------------------------------------------------------------------------------------------------
    def open_new(self, when: pd.Timestamp) -> None:
        """The bar forming at ``when`` begins: decide at the terminal's quote (a refused quote: look again
        at the next poll; a bar that closes meanwhile is decided at its own open, as a missed one)."""
        run = self.shared
        try:
            _, bid, ask = self._tick(when)
        except QuoteError as exc:
            self.lifecycle.refused_quote(exc, f"bar {when} is not decided on yet; looking again")
            return
        run.last_refusal = None
        t = len(run.bars.feed)
        if self.broker is not None:
            self.broker.open_bar(when, bid, ask)
        run.journal.write("open", bar=t, time=when, bid=bid, ask=ask, missed=False)
        self.lifecycle.decide(t, when)

    def closed(self, when: pd.Timestamp, row: pd.Series) -> None:
        run = self.shared
        t = len(run.bars.feed)
        if run.forming is not None and run.forming[1] != when:
            raise LiveError(
                f"the terminal's bar {when} is not the bar forming at {run.forming[1]}: "
                "its history changed under the run; start a new journal"
            )
        if run.forming is None:  # closed before it was decided on: unreachable, or its quote refused
            if run.settings.skip_missed:
                run.summary.skipped += 1
                log.info("bar %s closed before it was decided on: skipped (no on_bar)", when)
                message = f"bar {when} skipped: closed before it was decided on"
                run.journal.write("warning", bar=t, message=message)
                if self.broker is not None:
                    self.broker.add_bar(when, float(row["open"]), float(row["spread"]))
            else:
                run.summary.missed += 1
                log.info("bar %s closed before it was decided on: processed now, at its open", when)
                spread = float(row["spread"])
                bid = float(row["open"])
                if self.broker is not None:
                    self.broker.add_bar(when, bid, spread)
                run.journal.write(
                    "open",
                    bar=t,
                    time=when,
                    bid=bid,
                    ask=bid + spread * self.meta.point,
                    spread_points=spread,
                    missed=True,
                )
                self.lifecycle.decide(t, when, missed=True)
        if self.broker is not None:
            self.broker.close_bar(t, float(row["high"]), float(row["low"]), float(row["close"]))
        run.bars.append(row.to_frame().T.astype(float).set_axis(pd.DatetimeIndex([when]), axis=0))
        run.forming = None
        run.journal.write("bar", **bar_record(t, when, row, skipped=t not in run.decided))
        self._status.show(when, row, self.meta, run.ctx.trading, self.broker)

    def on_tick(self) -> None:
        run = self.shared
        try:
            stamp, bid, ask = self._tick(run.forming[1])
        except QuoteError as exc:
            self.lifecycle.refused_quote(exc, "no on_tick at it")
            return
        run.last_refusal = None
        if self._last_quote == (bid, ask):
            return
        self._last_quote = (bid, ask)
        if self.broker is not None:
            self.broker.set_tick(bid, ask)
        run.journal.write("tick", bar=run.forming[0], time=stamp, bid=bid, ask=ask)
        call_hook(
            run.ea,
            "on_tick",
            Tick(stamp, bid, ask),
            where=f"at {stamp}",
            bar=run.forming[0],
            time=stamp,
        )

    # -- the stop --------------------------------------------------------------------------------------------
    def close_on_exit(self) -> int:
        """``--close-on-exit``: every position of the EA closed (every number it used is its own); on paper
        at the terminal's quote, set on the paper account, and none when it is refused (the positions are
        left as they are). A live account closes at the terminal's own price."""
        run = self.shared
        if self.broker is not None:
            try:
                _, bid, ask = self._tick(run.now())
            except QuoteError as exc:
                self.lifecycle.refused_quote(exc, "positions left open at the stop")
                return 0
            self.broker.set_tick(bid, ask)
            run.journal.write("tick", bar=run.bar(), time=run.now(), bid=bid, ask=ask)
        return run.ctx.close(None, None)
