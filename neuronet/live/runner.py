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
same journal, the run resumes after the last bar it processed, with its paper account rebuilt from the
journal (``rebuild``); on a live account the terminal holds the positions, found by the EA's magic number,
and a daily loss halt journaled on the same server day holds again (``TerminalTrade.restore_halt``). A live
run journals its account at the start (``account``: the magic number and balance ``neuronet live report``
scores it with), and once the terminal answers again after a drop, the requests whose reply was lost are
looked up (``TerminalTrade.resolve``) before the EA decides anything more.
``sleep`` is injectable, so tests run on simulated time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from backtests.broker import AccountConfig
from backtests.periods import Periods
from datafeeds.candles import CandleMeta, meta_of
from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalConnectionError, TerminalError, UnknownSymbolError
from datafeeds.timeframes import Timeframe
from neuronet.live.context import LiveBars, LiveContext
from neuronet.live.errors import JournalError, LiveError
from neuronet.live.identity import check_magic, check_same_account, terminal_account
from neuronet.live.journal import Journal, JournalRecords, json_ready
from neuronet.live.paper import PaperBroker
from neuronet.live.quotes import QuoteBounds, QuoteError, check_prices, check_time
from neuronet.live.rebuild import JournalState, bar_record, history_record, read_state
from neuronet.live.status import StatusLine
from strategies.base import ExpertAdvisor, call_hook, make_ea
from strategies.errors import EARuntimeError
from strategies.trade import Tick

log = logging.getLogger(__name__)


# The command-line option of each setting, named in errors (the settings are also set from Python).
_OPTION = {
    "poll_s": " (--poll)",
    "history_bars": " (--history)",
    "study_bars": " (--study-bars)",
    "max_bars": " (--max-bars)",
}


@dataclass(frozen=True)
class LiveSettings:
    """How a live run goes (times in seconds)."""

    symbol: str
    timeframe: Timeframe
    journal: Path
    mode: str = "paper"  # "paper" (the backtest broker on live prices) or "live" (the terminal trades)
    account: AccountConfig = field(default_factory=AccountConfig)
    history_bars: int = 0  # closed bars taken from the terminal at the start; 0 = all it holds
    study_bars: int = 0  # bars of on_study's window; 0 = the whole history
    poll_s: float = 1.0  # between two looks at the terminal
    backoff_s: float = 1.0  # first wait after a dropped link; doubled after each failure
    backoff_max_s: float = 60.0
    skip_missed: bool = False  # bars closed while unreachable: skipped (True) or processed in order
    close_on_exit: bool = False
    max_bars: int | None = None  # stop after this many bars closed (None: until Ctrl-C)

    def __post_init__(self) -> None:
        if not isinstance(self.symbol, str) or not self.symbol.strip():
            raise LiveError(f"symbol (--symbol) must name a symbol, not {self.symbol!r}")
        if self.mode not in ("paper", "live"):
            raise LiveError(f"mode must be 'paper' or 'live', not {self.mode!r}")
        for name in ("poll_s", "backoff_s", "backoff_max_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise LiveError(f"{name}{_OPTION.get(name, '')} must be >= 0 seconds, not {value!r}")
        for name, least in (("history_bars", 0), ("study_bars", 0), ("max_bars", 1)):
            value = getattr(self, name)
            if value is not None and value < least:
                raise LiveError(f"{name}{_OPTION[name]} must be >= {least}, not {value}")


@dataclass
class LiveSummary:
    """What a run did (this session only)."""

    journal: Path
    bars_closed: int = 0
    decisions: int = 0
    missed: int = 0
    skipped: int = 0
    reconnects: int = 0
    resumed: bool = False
    interrupted: bool = False


class _Stop(Exception):
    """Internal: the run reached ``max_bars``."""


class LiveRunner:
    """Run ``ea_class(**params)`` live (see the module docstring).

    ``trading``: for ``mode="live"``, a factory ``(source, symbol, magic, record, *, market) -> trade
    object`` (the terminal trade context, ``TerminalTrade``; ``market`` gives the ``QuoteBounds`` every
    quote a request reads is checked against); paper runs build their ``PaperBroker`` themselves.
    ``status``: where the one line per bar goes (default: the log).
    """

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
        if settings.mode == "live" and trading is None:
            raise LiveError("a live run needs a trade context factory")
        if settings.mode == "live":
            check_magic(ea_class, params)  # manual trades carry magic 0: they are not this run's
        self.ea_class, self.params, self.source, self.s = ea_class, dict(params), source, settings
        self._trading_factory = trading
        self._sleep = sleep or time.sleep
        self._status = StatusLine(status or log.info, settings.symbol, settings.timeframe.name)
        self.summary = LiveSummary(settings.journal)
        self._started = False
        self._begun = False  # the journal has this run's start (or resume): a stop may follow it
        self._market_bar: pd.Timestamp | None = None  # UTC open of the bar the terminal forms, last read
        self.journal: Journal | None = None  # open while ``run`` runs
        # Set when the run starts (``_start``), fresh or from the journal:
        self.meta: CandleMeta | None = None  # the bars' symbol, digits and broker clock
        self.fs = 0  # the first live bar (the history's length)
        self.broker: PaperBroker | None = None  # the paper account (None on a live account)
        self.bars: LiveBars | None = None  # the closed bars and the EA's indicators
        self.ea: ExpertAdvisor | None = None
        self.ctx: LiveContext | None = None  # the EA's trade context
        self.forming: tuple[int, pd.Timestamp] | None = None  # the bar decided on and not closed yet
        self.decided: set[int] = set()  # bars whose on_bar finished
        self._last_refusal: str | None = None  # the quote refusal last journaled (not repeated)
        self._last_quote: tuple[float, float] | None = None  # the last quote on_tick saw

    # -- terminal calls, surviving drops ------------------------------------------------------------------
    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        wait = self.s.backoff_s
        while True:
            try:
                return call()
            except TerminalError as exc:
                if not self._started or not (exc.transient or isinstance(exc, TerminalConnectionError)):
                    raise  # a terminal that cannot be reached at the start is a setting to fix, not a drop
                self.summary.reconnects += 1
                log.warning("%s: %s; trying again in %.1f s", what, exc, wait)
                if self.journal is not None:
                    self.journal.write("reconnect", during=what, error=str(exc), wait_s=wait)
                self._sleep(wait)
                wait = min(max(wait * 2, 0.001), self.s.backoff_max_s)

    def _fetch(self, after: pd.Timestamp | None):
        start = None if after is None else after + pd.Timedelta(seconds=1)
        s = self.s
        fetched = self._retrying("reading bars", lambda: self.source.fetch(s.symbol, s.timeframe, start))
        self._market_bar = fetched.final_until
        return fetched

    def quote_bounds(self) -> QuoteBounds | None:
        """What a quote is checked against now (``quotes.QuoteBounds``): the bar the terminal is forming
        as last read, and the price band of the closed bars; None before the first bars are known."""
        if self._market_bar is None or self.bars is None or not len(self.bars.feed):
            return None
        feed = self.bars.feed
        return QuoteBounds.of(
            feed.column("high"),
            feed.column("low"),
            feed.column("close")[-1],
            self._market_bar,
            self.s.timeframe.seconds,
        )

    def _tick(self, bar_open: pd.Timestamp) -> tuple[pd.Timestamp, float, float]:
        """The terminal's quote for the bar opened at ``bar_open``, checked (``quotes``): one that is
        missing, not a price, crossed, at a time far from that bar or at prices far from the recent bars
        is a ``QuoteError``."""
        symbol = self.s.symbol
        try:
            when, bid, ask = self._retrying("reading the quote", lambda: self.source.tick(symbol))
        except UnknownSymbolError as exc:  # None: the symbol was there when the run started
            raise QuoteError(str(exc)) from None
        except (TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise QuoteError(f"the terminal's {symbol} quote cannot be read ({exc})") from None
        bid, ask = check_prices(symbol, bid, ask)
        check_time(symbol, when, bar_open, self.s.timeframe.seconds)
        bounds = self.quote_bounds()
        if bounds is not None:
            bounds.check_prices(symbol, bid, ask)
        return when, bid, ask

    def _refused_quote(self, exc: QuoteError, then: str) -> None:
        """Log and journal a refused quote (once while the same refusal repeats look after look)."""
        message = f"{exc}: {then}"
        if message != self._last_refusal:
            log.warning("%s", message)
            self.journal.write("warning", bar=self._bar(), message=message)
        self._last_refusal = message

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> LiveSummary:
        """Run until ``max_bars`` bars closed or Ctrl-C (re-raised after a clean stop)."""
        path = Path(self.s.journal)
        journal = Journal(path)  # new, or proven a journal: locked for this run, its last line made whole
        try:
            state = self._check_resume(path, JournalRecords(path)) if path.stat().st_size else None
            if state is not None and self.s.mode == "live":  # only on the account it was written on
                check_same_account(path, state.account, self._terminal_account(), "give a new --journal")
        except BaseException:
            journal.close()
            raise
        self.journal = journal
        try:
            self._start(state)
            self._loop()
        except KeyboardInterrupt:
            self.summary.interrupted = True
            self._finish("interrupted")
            raise
        except _Stop:
            self._finish("max_bars")
        except BaseException as exc:
            self._finish(f"error: {type(exc).__name__}", deinit=not isinstance(exc, EARuntimeError))
            raise
        finally:
            self.journal.close()
        return self.summary

    def _check_resume(self, path: Path, records: JournalRecords) -> JournalState:
        """The state to resume from, read a record at a time; a journal of another run is refused."""
        start, s = records.start, self.s
        mine = {
            "ea": self.ea_class.__name__,
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

    def _terminal_account(self) -> Any:
        return self._retrying("reading the account", lambda: terminal_account(self.source))

    def _params(self) -> dict:
        return self.ea_class.resolve_params(self.params)

    def _start(self, state: JournalState | None) -> None:
        s = self.s
        if state is None:
            fetched = self._fetch(None)
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
                "ea": self.ea_class.__name__,
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
            self.journal.write_all(("start", start), ("history", history_record(hist)))
            self._begun = True
            self.broker = PaperBroker(hist, self.meta.point, s.account) if s.mode == "paper" else None
            self.forming, self.decided = None, set()
            first_open = fetched.final_until
        else:
            self.summary.resumed = True
            hist, self.meta, self.fs = state.bars, state.meta, state.forward_start
            self.broker, self.forming, self.decided = state.broker, state.forming, state.decided
            self.journal.write(
                "resume",
                after_bar=len(hist) - 1,
                forming=None if self.forming is None else self.forming[0],
                at=pd.Timestamp.now(tz="UTC"),
            )
            self._begun = True
            log.info("resuming %s after bar %d (%s)", s.journal, len(hist) - 1, hist.index[-1])
            if self.forming is not None and self.forming[0] not in self.decided:
                log.warning(
                    "on_bar at bar %d was cut short by the stop: the requests it made stand, "
                    "it is not run again",
                    self.forming[0],
                )
        self.bars = LiveBars(hist, self.meta)
        self.ea = make_ea(self.ea_class, self.params)
        # The backtest's retraining rule over the live bars (the history is the study period).
        self.periods = Periods(len(hist), self.fs, s.study_bars).for_ea(int(self.ea.retrain_every))
        trading = self.broker
        if trading is None:
            self._retrying("connecting", self.source.link)  # fail early, with backoff, if it is down
            # The source, not the raw link: its ``call`` reconnects after a drop (``TerminalSource.call``).
            trading = self._trading_factory(
                self.source, s.symbol, self.ea.magic, self._record_trade, market=self.quote_bounds
            )
            if state is not None and state.halted_day is not None:
                trading.restore_halt(state.halted_day)  # a restart does not lift the day's halt
            if state is not None and state.unresolved:
                trading.restore_unresolved(state.unresolved)  # looked up, counted open, never sent again
            acc = self._retrying("reading the account", trading.account)
            who = self._terminal_account()
            # Who the run is, for ``neuronet live report``: its magic number and the account it started on.
            self.journal.write(
                "account",
                magic=int(self.ea.magic),
                balance=acc.balance,
                currency=acc.currency,
                leverage=acc.leverage,
                login=int(who.login),
                server=str(who.server),
            )
        self.ctx = LiveContext(trading, self.bars, self.journal.write, self._now, self._bar)
        self.ea.attach(self.ctx, self.bars.feed.bars)
        call_hook(self.ea, "on_init", where="before the first live bar")
        upcoming = len(self.bars.feed)  # the next bar to decide on (a resumed run is past fs)
        at = self.periods.last_training(upcoming - 1)  # resumed: the latest retraining, as the run had it
        self._study(at, self.bars.feed.time[at - 1])
        self._started = True
        if state is None:
            self._open_new(first_open)

    def _study(self, t: int, when: pd.Timestamp) -> None:
        """``on_study`` before bar ``t`` on the backtest's study window: every earlier bar, or the last
        ``study_bars``."""
        a, b = self.periods.study_range(t)
        call_hook(self.ea, "on_study", self.bars.feed.bars.window(a, b), where=f"before bar {t} ({when})",
                  bar=t, time=when)

    def _record_trade(self, record: dict) -> None:
        """The terminal trade context's own records (requests sent, answers) go to the journal too."""
        kind = "result" if "retcode" in record else "request"
        self.journal.write(kind, source="terminal", terminal=record)  # nested: its keys are its own

    def _now(self) -> pd.Timestamp:
        return self.forming[1] if self.forming else self.bars.feed.time[-1]

    def _bar(self) -> int:
        return self.forming[0] if self.forming else len(self.bars.feed) - 1

    # -- bars ------------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            fetched = self._fetch(self.bars.feed.time[-1])
            self._resolve_lost()
            before = self.summary.missed + self.summary.skipped
            try:
                for when, row in fetched.frame.iterrows():
                    self._closed(when, row)
            finally:
                late = self.summary.missed + self.summary.skipped - before
                if late:
                    what = "skipped (no on_bar)" if self.s.skip_missed else "processed in order"
                    log.warning(
                        "%d bars closed before they were decided on (terminal unreachable or quote refused): "
                        "%s",
                        late,
                        what,
                    )
            if self.forming is None and fetched.final_until > self.bars.feed.time[-1]:
                self._open_new(fetched.final_until)
            elif self.forming is not None and self.ea.wants_ticks():
                self._on_tick()
            self._sleep(self.s.poll_s)

    def _resolve_lost(self) -> None:
        """The terminal answers again: look up the requests whose reply was lost while it could not be
        asked (``TerminalTrade.unresolved``), before the EA decides anything more; they were never sent
        twice, and now each is journaled as found or not executed. Still unreachable: the next look."""
        trading = self.ctx.trading
        if not getattr(trading, "unresolved", None):
            return
        try:
            trading.resolve()
        except (TerminalError, QuoteError) as exc:
            log.warning("requests whose reply was lost cannot be looked up yet: %s", exc)

    def _open_new(self, when: pd.Timestamp) -> None:
        """The bar forming at ``when`` begins: decide at the terminal's quote (a refused quote: look again
        at the next poll; a bar that closes meanwhile is decided at its own open, as a missed one)."""
        try:
            _, bid, ask = self._tick(when)
        except QuoteError as exc:
            self._refused_quote(exc, f"bar {when} is not decided on yet; looking again")
            return
        self._last_refusal = None
        t = len(self.bars.feed)
        if self.broker is not None:
            self.broker.open_bar(when, bid, ask)
        self.journal.write("open", bar=t, time=when, bid=bid, ask=ask, missed=False)
        self._decide(t, when)

    def _closed(self, when: pd.Timestamp, row: pd.Series) -> None:
        t = len(self.bars.feed)
        if self.forming is not None and self.forming[1] != when:
            raise LiveError(
                f"the terminal's bar {when} is not the bar forming at {self.forming[1]}: "
                "its history changed under the run; start a new journal"
            )
        if self.forming is None:  # closed before it was decided on: unreachable, or its quote refused
            if self.s.skip_missed:
                self.summary.skipped += 1
                log.info("bar %s closed before it was decided on: skipped (no on_bar)", when)
                message = f"bar {when} skipped: closed before it was decided on"
                self.journal.write("warning", bar=t, message=message)
                if self.broker is not None:
                    self.broker.add_bar(when, float(row["open"]), float(row["spread"]))
            else:
                self.summary.missed += 1
                log.info("bar %s closed before it was decided on: processed now, at its open", when)
                spread = float(row["spread"])
                bid = float(row["open"])
                if self.broker is not None:
                    self.broker.add_bar(when, bid, spread)
                self.journal.write(
                    "open",
                    bar=t,
                    time=when,
                    bid=bid,
                    ask=bid + spread * self.meta.point,
                    spread_points=spread,
                    missed=True,
                )
                self._decide_late(t, when)
        if self.broker is not None:
            self.broker.close_bar(t, float(row["high"]), float(row["low"]), float(row["close"]))
        self.bars.append(row.to_frame().T.astype(float).set_axis(pd.DatetimeIndex([when]), axis=0))
        self.forming = None
        self.journal.write("bar", **bar_record(t, when, row, skipped=t not in self.decided))
        self.summary.bars_closed += 1
        self._status.show(when, row, self.meta, self.ctx.trading, self.broker)
        if self.s.max_bars is not None and self.summary.bars_closed >= self.s.max_bars:
            raise _Stop

    def _decide_late(self, t: int, when: pd.Timestamp) -> None:
        """A bar that closed before it was decided on. Paper fills its requests at its open, as the backtest
        does; a live account cannot trade at that price any more (the terminal would fill every stale
        decision of a long stop at once, at the price now), so there its requests are refused with "no
        quotes" (``TerminalTrade.late``) and the account is left as it was."""
        trading = self.ctx.trading
        if self.broker is not None or not hasattr(trading, "late"):
            self._decide(t, when)
            return
        trading.late = f"bar {when} closed before it was decided on: a live account cannot trade at its open"
        try:
            self._decide(t, when)
        finally:
            trading.late = None

    def _decide(self, t: int, when: pd.Timestamp) -> None:
        self.forming = (t, when)
        self.bars.show(self.ea)
        if self.periods.retrains_at(t):  # walk-forward retraining, as the backtest
            self._study(t, when)
        try:
            self.ea.on_bar()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            name = type(self.ea).__name__
            raise EARuntimeError(name, "on_bar", f"at bar {t} ({when})", exc, t, when) from exc
        self.decided.add(t)
        self.summary.decisions += 1
        net = sum(p.side * p.lots for p in self.ctx.positions())
        self.journal.write("decision", bar=t, time=when, position=net, retcode=self.ctx.last_retcode)

    def _on_tick(self) -> None:
        try:
            stamp, bid, ask = self._tick(self.forming[1])
        except QuoteError as exc:
            self._refused_quote(exc, "no on_tick at it")
            return
        self._last_refusal = None
        if self._last_quote == (bid, ask):
            return
        self._last_quote = (bid, ask)
        if self.broker is not None:
            self.broker.set_tick(bid, ask)
        self.journal.write("tick", bar=self.forming[0], time=stamp, bid=bid, ask=ask)
        call_hook(
            self.ea, "on_tick", Tick(stamp, bid, ask), where=f"at {stamp}", bar=self.forming[0], time=stamp
        )

    # -- the stop --------------------------------------------------------------------------------------------
    def _closing_quote(self) -> bool:
        """Paper: the quote ``--close-on-exit`` closes at, set on the paper account (False when refused:
        the positions are left as they are). A live account closes at the terminal's own price."""
        if self.broker is None:
            return True
        try:
            _, bid, ask = self._tick(self._now())
        except QuoteError as exc:
            self._refused_quote(exc, "positions left open at the stop")
            return False
        self.broker.set_tick(bid, ask)
        self.journal.write("tick", bar=self._bar(), time=self._now(), bid=bid, ask=ask)
        return True

    def _finish(self, reason: str, deinit: bool = True) -> None:
        """Stop cleanly: positions left open unless ``close_on_exit``; ``on_deinit``; a stop record."""
        if self.ea is None or self.ctx is None or self.journal is None:  # stopped before on_init
            if self.journal is not None and self._begun:  # a new journal stays empty: a stop first in
                self.journal.write("stop", reason=reason, at=pd.Timestamp.now(tz="UTC"))  # it is no journal
            return
        closed = 0
        try:
            if self.s.close_on_exit and self._closing_quote():
                closed = self.ctx.close(None, self.ea.magic)
            if deinit:
                self.ea.mark_run(
                    complete=reason == "max_bars", interrupted=None if reason == "max_bars" else reason
                )
                call_hook(self.ea, "on_deinit", where="at the stop")
        finally:
            self._warn_unresolved()
            self.journal.write("stop", reason=reason, closed_on_exit=closed, at=pd.Timestamp.now(tz="UTC"))

    def _warn_unresolved(self) -> None:
        """A live run that stops with requests whose reply was lost and that the terminal has not shown
        says so (a resumed run looks them up again: ``TerminalTrade.restore_unresolved``)."""
        ctx = self.ctx
        lost = sorted(getattr(ctx.trading, "unresolved", None) or ()) if ctx is not None else []
        if lost:
            message = (
                f"stopping with {len(lost)} request(s) whose reply was lost and that the terminal does not "
                f"show yet ({', '.join(lost)}): check the terminal; a resumed run looks them up again"
            )
            log.warning("%s", message)
            self.journal.write("warning", bar=self._bar(), message=message)
