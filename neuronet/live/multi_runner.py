"""The live lifecycle of a multi-symbol, multi-timeframe EA: one runner, the EA's symbols and timeframes.

As the backtest runs it (``backtests.multi_replay``): the main chart is the first declared symbol on the
first declared timeframe; a new main-chart bar triggers ``on_bar``, and ``data(symbol, timeframe)`` shows
each symbol's bars closed at that moment (``strategies.views``: a D1 bar only once it closed on the broker's
clock; a symbol whose bar has not arrived yet shows its last closed bar). Bars come from the terminal's
rates (``TerminalSource.fetch``: only bars before the one forming), never from the local clock. Decisions
are made at each symbol's live quote; a symbol whose quote is missing or stale at a bar's open has no
market then (the backtest's flat bar: "market closed").

Paper (default) books on the backtest's multi-symbol account (``multi_paper``); a live account trades
through one ``TerminalTrade`` per symbol (``multi_context.TerminalRouter``), each under its symbol's limits
and the account's (``limits.AccountLimits``). Every request is journaled with its symbol before it is
sent; the lost-replies logic looks a request up by symbol, comment and magic before anything is sent
again. The journal's identity names the EA's symbols and timeframes: a journal of another symbol set is
refused, as another EA's is.

The loop, the retries after a drop, the lost-reply look-ups, the decision and the stop are the engine's
(``engine.LiveEngine``), shared with the one-symbol runner: this runner makes one and is its part
(``engine.Chart``), holding what is several symbols'. The engine gives it, once (``attach``), the state
both share (``shared_state.SharedState``: the settings, the journal, the bars, the EA, its context, the bar
forming) and what the engine does for it (``shared_state.Lifecycle``: the retries, a decision, a study);
the part reaches the engine through nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from backtests.periods import Periods
from datafeeds.candles import meta_of
from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import NoBarsError, UnknownSymbolError
from neuronet.live.context import LiveBars
from neuronet.live.day_pnl import DayPnl
from neuronet.live.engine import LiveEngine
from neuronet.live.errors import LiveError
from neuronet.live.journal import JournalRecords, json_ready
from neuronet.live.limits import AccountState
from neuronet.live.multi_context import MultiLiveContext, TerminalRouter
from neuronet.live.multi_market import SymbolQuotes, declared, first_history, terminal_specs
from neuronet.live.multi_paper import Closed, MultiPaper, Quote
from neuronet.live.multi_resume import MultiJournal, check_identity, read_multi, replay
from neuronet.live.multi_views import LiveViews
from neuronet.live.quotes import QuoteError
from neuronet.live.rebuild import history_record
from neuronet.live.shared_state import Lifecycle, LiveSettings, LiveSummary, SharedField, SharedState
from strategies.base import ExpertAdvisor, call_hook, make_ea
from strategies.trade import Tick

log = logging.getLogger(__name__)


class MultiLiveRunner:
    """Run ``ea_class(**params)`` live over its declared symbols and timeframes (see the module docstring):
    the several-symbol ``Chart`` of a ``LiveEngine`` it makes and runs (``_engine``), which
    attaches it (``attach``).

    ``trading``, ``sleep``: as ``LiveEngine``'s. ``status``: where the one line per bar goes (default: the
    log). ``settings.symbol``/``timeframe`` are the main chart's."""

    s = SharedField("settings")  # the shared state's settings, summary, EA and trade context, for callers
    summary = SharedField("summary")
    ea = SharedField("ea")
    ctx = SharedField("ctx")
    forming = SharedField("forming")  # the bar decided on, as a resumed run's replay moves it

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
        # Given by the engine (``attach``), while it is made here:
        self.shared: SharedState | None = None
        self.lifecycle: Lifecycle | None = None
        self._engine = LiveEngine(self, ea_class, params, source, settings, trading=trading, sleep=sleep)
        self.symbols, self.timeframes = declared(ea_class, settings.symbol, settings.timeframe.name)
        if (self.symbols[0], self.timeframes[0]) != (settings.symbol, settings.timeframe.name):
            raise LiveError(
                f"{ea_class.__name__}'s main chart is {self.symbols[0]} {self.timeframes[0]}, "
                f"not {settings.symbol} {settings.timeframe.name} (--symbol/--timeframe)"
            )
        self.main = (self.symbols[0], self.timeframes[0])
        self.main_tf = settings.timeframe
        self._emit = status or log.info
        self.views: LiveViews | None = None
        self.paper: MultiPaper | None = None
        self.router: TerminalRouter | None = None
        self.t = 0  # bars of the account's timeline so far
        self._last_quotes: dict[str, Quote] | None = None
        self.quotes = SymbolQuotes(
            self.shared,
            self.lifecycle.retrying,
            self.symbols,
            settings.timeframe,
            lambda: None if self.views is None else self.views.feeds,
        )

    def attach(self, shared: SharedState, lifecycle: Lifecycle) -> None:
        self.shared, self.lifecycle = shared, lifecycle

    def run(self) -> LiveSummary:
        """Run until ``max_bars`` bars closed or Ctrl-C (``LiveEngine.run``)."""
        return self._engine.run()

    def _fetch(self, key: tuple[str, str], after: pd.Timestamp | None):
        start = None if after is None else after + pd.Timedelta(seconds=1)
        try:
            return self.lifecycle.retrying(
                f"reading {key[0]} {key[1]} bars", lambda: self.shared.source.fetch(key[0], key[1], start)
            )
        except (UnknownSymbolError, NoBarsError) as exc:
            if self.shared.started:
                raise
            raise LiveError(f"{self.shared.ea_class.__name__} reads {key[0]} {key[1]}: {exc}") from None

    def fetch_main(self, after: pd.Timestamp | None):
        fetched = self._fetch(self.main, after)
        self.shared.market_bar = fetched.final_until
        return fetched

    def account_state(self, day: int | None = None) -> AccountState:
        """The whole account (``TerminalRouter.account_state``; nothing on paper), as the account-wide
        limits (``limits.AccountLimits``) read it."""
        return AccountState(0, DayPnl(0.0)) if self.router is None else self.router.account_state(day)

    # -- the run ---------------------------------------------------------------------------------------------
    def identity(self) -> dict:
        """What makes a journal this run's: the EA, its parameters, its symbols and timeframes, the mode."""
        return {
            "ea": self.shared.ea_class.__name__,
            "params": json_ready(self.shared.ea_class.resolve_params(self.shared.params)),
            "symbol": self.main[0],
            "timeframe": self.main[1],
            "symbols": list(self.symbols),
            "timeframes": list(self.timeframes),
            "mode": self.shared.settings.mode,
        }

    def read_journal(self, path: Path, records: JournalRecords) -> MultiJournal:
        """The journal read back (``multi_resume``); one of another run is refused."""
        check_identity(path, records.start, self.identity(), self.shared.settings.account)
        return read_multi(path, records)

    def _history(self) -> tuple[dict, dict, Any]:
        """A new run's specifications and history of every (symbol, timeframe), journaled; and the fetch
        of the main chart (its ``final_until`` is the bar forming now)."""
        run = self.shared
        s = run.settings
        specs = terminal_specs(run.source, self.symbols, run.ea_class.__name__, self.lifecycle.retrying)
        frames, fetched_main = first_history(self._fetch, self.symbols, self.timeframes, s.history_bars)
        main_hist = frames[self.main]
        start = {
            **self.identity(),
            "params": run.ea_class.resolve_params(run.params),
            "meta": meta_of(main_hist).to_dict(),
            "account": asdict(s.account),
            "specs": {name: asdict(spec) for name, spec in specs.items()},
            "forward_start": len(main_hist),
            "study_bars": s.study_bars,
            "started": pd.Timestamp.now(tz="UTC"),
        }
        histories = [
            ("history", {"symbol": k[0], "timeframe": k[1], **history_record(df)}) for k, df in frames.items()
        ]
        run.journal.write_all(("start", start), *histories)
        run.begun = True
        return specs, frames, fetched_main

    def begin(self, state: MultiJournal | None) -> None:
        run = self.shared
        s = run.settings
        if state is None:
            specs, frames, fetched = self._history()
            run.market_bar = fetched.final_until
            fs = len(frames[self.main])
        else:
            run.summary.resumed = True
            specs, frames, fs = state.specs, state.frames, int(state.start["forward_start"])
        main_hist = frames[self.main]
        run.bars = LiveBars(main_hist, meta_of(main_hist))
        self.views = LiveViews(frames, self.main, run.bars.feed)
        self.t = len(main_hist)
        run.ea = make_ea(run.ea_class, run.params)
        if s.mode == "paper":
            history = {name: frames[(name, self.main[1])] for name in self.symbols}
            self.paper = MultiPaper(history, specs, s.account)
            trading: Any = self.paper.context
        else:
            self.lifecycle.retrying("connecting", run.source.link)
            make, magic, bounds = run.trading_factory, run.ea.magic, self.quotes.bounds
            trades = {
                n: make(run.source, n, magic, self.lifecycle.record_trade, market=bounds(n))
                for n in self.symbols
            }
            self.router = trading = TerminalRouter(trades, self.main[0])
            if state is not None and state.halted_day is not None:
                self.router.restore_halt(state.halted_day)  # a restart does not lift the day's halt
            if state is not None and state.unresolved:
                self.router.restore_unresolved(state.unresolved)  # looked up by symbol, never sent again
            if state is not None and state.magics:
                self.router.restore_magics(state.magics)  # each symbol's positions of every number it used
            if state is not None and state.owned:
                self.router.restore_owned(state.owned)  # their owners known without the deal history
        run.ctx = MultiLiveContext(trading, run.bars, run.journal.write, run.now, run.bar)
        again: list[dict] = []
        if state is not None:
            again = replay(self, state.events, Path(s.journal))
            forming = None if run.forming is None else run.forming[0]
            run.journal.write("resume", after_bar=self.t - 1, forming=forming, at=pd.Timestamp.now(tz="UTC"))
            run.begun = True
            log.info("resuming %s after bar %d", s.journal, self.t - 1)
        if self.router is not None:
            self.lifecycle.journal_account(self.router.account)
        run.periods = Periods(self.t, fs, s.study_bars).for_ea(int(run.ea.retrain_every))
        run.ea.attach(run.ctx, run.bars.feed.bars, None, views=self.views)
        call_hook(run.ea, "on_init", where="before the first live bar")
        run.bars.show(run.ea)  # the main chart's indicators first (it reveals every closed main bar)
        step = pd.Timedelta(self.main_tf.seconds, "s")
        now = run.forming[1] if run.forming else run.bars.feed.time[-1] + step
        self.views.advance(int(now.value))
        at = run.periods.last_training(self.t - 1) if state is not None else self.t
        self.lifecycle.study(at, run.bars.feed.time[at - 1])
        run.started = True
        if state is None:
            self.open_new(fetched.final_until)
        elif run.forming is not None and again is not None:
            # Cut short by the stop in the middle of a bar: decided again, and each request already
            # journaled for it is answered from the journal, not sent again (``answers``).
            log.warning(
                "on_bar at bar %d was cut short by the stop: run again, %d request(s) it had made are not "
                "sent again",
                run.forming[0],
                len(again),
            )
            # A bar that has closed since is decided late: on a live account the requests not sent yet
            # are refused (its open cannot be traded any more), never sent at the price now.
            fetched = self._fetch(self.main, run.bars.feed.time[-1])
            run.market_bar = fetched.final_until
            run.ctx.answers.start(again)
            self.lifecycle.decide(*run.forming, missed=fetched.final_until > run.forming[1])

    def show(self, when: pd.Timestamp) -> None:
        self.shared.bars.show(self.shared.ea)
        self.views.advance(int(when.value))

    def positions(self) -> dict:
        return {
            "positions": {
                name: sum(p.side * p.lots for p in self.shared.ctx.positions(name)) for name in self.symbols
            }
        }

    def terminal(self) -> Any:
        """The live account's symbols' trade contexts (``TerminalRouter``); None on paper."""
        return self.router

    # -- bars ------------------------------------------------------------------------------------------------
    def open_new(self, when: pd.Timestamp) -> None:
        """The main bar forming at ``when`` begins: decide at every symbol's quote (a refused main quote:
        look again at the next poll)."""

        def refused(message: str) -> None:
            self.shared.journal.write("warning", bar=self.t, message=message)

        try:
            quotes = self.quotes.at_open(when, refused)
        except QuoteError as exc:
            message = f"{exc}: bar {when} is not decided on yet; looking again"
            log.warning("%s", message)
            self.shared.journal.write("warning", bar=self.t, message=message)
            return
        self._begin(when, quotes, missed=False)

    def _begin(
        self, when: pd.Timestamp, quotes: dict[str, Quote | None], *, missed: bool, decide: bool = True
    ) -> None:
        """Bar ``t`` of the timeline opens at ``when`` at ``quotes`` (journaled), then is decided on (not
        with ``decide=False``: a missed bar skipped)."""
        t = self.t
        self.open_bar(t, when, quotes)
        self.shared.journal.write(
            "open",
            bar=t,
            time=when,
            missed=missed,
            quotes={k: None if q is None else [q.bid, q.ask] for k, q in quotes.items()},
        )
        if decide:
            self.lifecycle.decide(t, when, missed=missed)

    def open_bar(self, t: int, when: pd.Timestamp, quotes: dict[str, Quote | None]) -> None:
        """The paper account and the run enter bar ``t`` (a resumed run's replay calls it too)."""
        if self.paper is not None:
            self.paper.open_bar(when, quotes)
        self.shared.forming = (t, when)

    def closed(self, when: pd.Timestamp, row: pd.Series) -> None:
        """The main bar at ``when`` closed: every other feed's bars closed by now are read, the paper account
        works the bar's range; a bar that closed before it was decided on is decided at its own opens."""
        run = self.shared
        if run.forming is not None and run.forming[1] != when:
            raise LiveError(
                f"the terminal's bar {when} is not the bar forming at {run.forming[1]}: "
                "its history changed under the run; start a new journal"
            )
        new = {self.main: row.to_frame().T.astype(float).set_axis(pd.DatetimeIndex([when]), axis=0)}
        for key in self.views.feeds:
            if key == self.main:
                continue
            got = self._fetch(key, self.views.feeds[key].time[-1]).frame
            if key[1] == self.main[1]:
                got = got[got.index <= when]  # bars of the timeline after this one arrive with it
            new[key] = got
        rows = {}
        for name in self.symbols:
            frame = new[(name, self.main[1])]
            rows[name] = frame.loc[when] if when in frame.index else None
        if run.forming is None:  # closed before it was decided on (unreachable, or its quote refused)
            quotes = {n: None if r is None else self.quotes.at_missed_open(n, r) for n, r in rows.items()}
            if run.settings.skip_missed:  # entered on the account at its open, as every bar is; no on_bar
                run.summary.skipped += 1
                log.info("bar %s closed before it was decided on: skipped (no on_bar)", when)
                message = f"bar {when} skipped: closed before it was decided on"
                run.journal.write("warning", bar=self.t, message=message)
            else:
                run.summary.missed += 1
            self._begin(when, quotes, missed=True, decide=not run.settings.skip_missed)
        t = run.forming[0]
        closed = {
            n: None if r is None else Closed(float(r["high"]), float(r["low"]), float(r["close"]))
            for n, r in rows.items()
        }
        self.close_bar(t, closed, new)
        feeds = {f"{k[0]} {k[1]}": history_record(frame) for k, frame in new.items() if len(frame)}
        run.journal.write(
            "bar", bar=t, time=when, bars={n: r and r._asdict() for n, r in closed.items()}, feeds=feeds
        )
        self._status(when, row)

    def close_bar(
        self, t: int, closed: dict[str, Closed | None], new: dict[tuple[str, str], pd.DataFrame]
    ) -> None:
        """Bar ``t`` closed with each symbol's bar (None: it had none) and ``new`` closed bars per feed (a
        resumed run's replay calls it too)."""
        if self.paper is not None:
            self.paper.close_bar(t, closed)
        for key, frame in new.items():
            if len(frame):
                self.views.append(key, frame)
        self.shared.forming = None
        self.t = t + 1

    def _status(self, when: pd.Timestamp, row: pd.Series) -> None:
        run = self.shared
        acc = run.ctx.account()
        net = " ".join(
            f"{name} {sum(p.side * p.lots for p in run.ctx.positions(name)):+.2f}" for name in self.symbols
        )
        digits = run.bars.feed.meta.digits
        today = ""
        if self.router is not None:  # the account's P&L of the day, as its daily loss limit counts it
            today = f" today {self.account_state().day_pnl.shown()}"
        self._emit(
            f"{when:%Y-%m-%d %H:%M} {self.main[0]} {self.main[1]} close {float(row['close']):.{digits}f} "
            f"positions {net} equity {acc.equity:.2f}{today}"
        )

    def on_tick(self) -> None:
        run = self.shared
        quotes = self.quotes.good(run.forming[1])
        if self.main[0] not in quotes or quotes == self._last_quotes:
            return
        self._last_quotes = quotes
        if self.paper is not None:
            self.paper.set_tick(quotes)
        q, stamp, t = quotes[self.main[0]], run.now(), run.forming[0]
        run.journal.write("tick", bar=t, time=stamp, quotes={k: [v.bid, v.ask] for k, v in quotes.items()})
        call_hook(run.ea, "on_tick", Tick(stamp, q.bid, q.ask), where=f"at {stamp}", bar=t, time=stamp)

    # -- the stop --------------------------------------------------------------------------------------------
    def close_on_exit(self) -> int:
        """``--close-on-exit``: the EA's positions closed (every number it used is its own); on paper each
        symbol's at its own quote then, set on the paper account. A symbol whose quote is refused (one gone
        quiet, its last tick older than the bar before, say) keeps its positions, logged and journaled;
        the others close all the same. A live account closes at the terminal's price."""
        run = self.shared
        if self.paper is None:
            return run.ctx.close(None, None)
        when = run.now()
        quotes = {}
        for name in self.symbols:
            try:
                quotes[name] = self.quotes.of(name, when)
            except QuoteError as exc:
                message = f"{exc}: {name} positions left open at the stop"
                log.warning("%s", message)
                run.journal.write("warning", bar=run.bar(), message=message)
        if not quotes:
            return 0
        self.paper.set_tick(quotes)
        run.journal.write(
            "tick", bar=run.bar(), time=when, quotes={k: [q.bid, q.ask] for k, q in quotes.items()}
        )
        if len(quotes) == len(self.symbols):
            return run.ctx.close(None, None)
        return sum(run.ctx.close(None, None, symbol=name) for name in quotes if run.ctx.positions(name))
