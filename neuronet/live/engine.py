"""The live lifecycle every run shares, whatever it trades: one engine, the per-symbol parts explicit.

A run opens (or resumes) its journal, starts the EA, then loops: read the main chart's bars closed since the
last look (``TerminalSource.fetch``: every bar before the one forming is final), look up the requests whose
reply was lost before the EA decides anything more, close each bar in order (one that closed before it was
decided on is decided at its own open), decide on the bar now forming, and between two bars hand the EA the
new quotes (``on_tick``). Terminal calls survive drops: after a transient error or a lost link the engine
waits ``backoff_s``, then twice that, up to ``backoff_max_s``, and tries again, journaling each retry. The
stop (``max_bars``, Ctrl-C, an error) closes positions with ``close_on_exit``, calls ``on_deinit`` and
journals a stop record; requests whose reply is still unknown are named then.

What differs between one symbol and several is a part the engine is given, never a subclass: a
``Chart`` (``runner.LiveRunner`` for one symbol, ``multi_runner.MultiLiveRunner`` for several) says how the
journal is read back, what the run starts from, how a bar opens and closes (one quote or every symbol's; one
paper broker or the multi-symbol account), what a decision record holds, and which live trade context
refuses a late bar's requests and holds the requests whose reply was lost. The engine owns the loop, the
journal, resume, the retries and the clock, and the state both share (the bars, the EA, its context).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from backtests.broker import AccountConfig
from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalConnectionError, TerminalError
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import JournalError, LiveError
from neuronet.live.identity import check_magic, check_same_account, terminal_account
from neuronet.live.journal import Journal, JournalRecords
from neuronet.live.quotes import QuoteError
from strategies.base import ExpertAdvisor, call_hook
from strategies.errors import EARuntimeError

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
    """How a live run goes (times in seconds); ``symbol``/``timeframe``: the main chart."""

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


class Stop(Exception):
    """Internal: the run reached ``max_bars``."""


LATE = "bar {} closed before it was decided on: a live account cannot trade at its open"


class Chart(Protocol):
    """What a live run trades, given to the engine that runs it: one symbol (``runner.LiveRunner``) or
    several (``multi_runner.MultiLiveRunner``). The engine calls these and nothing else of it; the part
    sets the state both share on its engine (``bars``, ``ea``, ``ctx``, ``periods``, ``forming``)."""

    def read_journal(self, path: Path, records: JournalRecords) -> Any:
        """The state to resume from (``account``: the account it was written on); another run's: refused."""

    def begin(self, state: Any) -> None:
        """A new run's history journaled or the journal's ``state`` taken back; the EA built and started."""

    def fetch_main(self, after: pd.Timestamp | None) -> Any:
        """The main chart's bars closed after ``after`` (``market_bar`` set to the bar forming)."""

    def closed(self, when: pd.Timestamp, row: pd.Series) -> None:
        """The main chart's bar opened at ``when`` closed with ``row``."""

    def open_new(self, when: pd.Timestamp) -> None:
        """The main chart's bar forming at ``when`` begins: decide on it at the terminal's quotes."""

    def on_tick(self) -> None:
        """New quotes inside the bar forming: ``on_tick``."""

    def closing_quotes(self) -> bool:
        """Paper: the quotes ``--close-on-exit`` closes at, set on the account (False when refused)."""

    def show(self, when: pd.Timestamp) -> None:
        """What the EA sees before deciding on the bar opened at ``when``."""

    def positions(self) -> dict:
        """A decision record's net position(s)."""

    def terminal(self) -> Any:
        """The live trade context (None on paper): ``late``, ``unresolved`` and ``resolve`` are its."""


class Shared:
    """A runner's attribute that is its engine's (``runner.engine.<name>``), read and set there: one owner."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, runner: Any, owner: type | None = None) -> Any:
        return self if runner is None else getattr(runner.engine, self.name)

    def __set__(self, runner: Any, value: Any) -> None:
        setattr(runner.engine, self.name, value)


class LiveEngine:
    """The shared lifecycle (see the module docstring) of ``ea_class(**params)`` on ``source``, trading
    what ``part`` says (``Chart``).

    ``trading``: for ``mode="live"``, a factory ``(source, symbol, magic, record, *, market) -> trade
    object`` (the terminal trade context, ``TerminalTrade``; ``market`` gives the ``QuoteBounds`` every
    quote a request reads is checked against), called once per traded symbol; paper runs build their
    account themselves. ``sleep`` is injectable, so tests run on simulated time."""

    def __init__(
        self,
        part: Chart,
        ea_class: type[ExpertAdvisor],
        params: dict[str, Any],
        source: TerminalSource,
        settings: LiveSettings,
        *,
        trading: Callable[..., Any] | None = None,
        sleep: Callable[[float], None] | None = None,
    ):
        if settings.mode == "live" and trading is None:
            raise LiveError("a live run needs a trade context factory")
        if settings.mode == "live":
            check_magic(ea_class, params)  # manual trades carry magic 0: they are not this run's
        self.part = part
        self.ea_class, self.params, self.source, self.s = ea_class, dict(params), source, settings
        self.trading_factory = trading
        self._sleep = sleep or time.sleep
        self.summary = LiveSummary(settings.journal)
        self.started = False  # past on_init: a dropped link is waited out from now on
        self.begun = False  # the journal has this run's start (or resume): a stop may follow it
        self.market_bar: pd.Timestamp | None = None  # UTC open of the bar the terminal forms, last read
        self.journal: Journal | None = None  # open while ``run`` runs
        self.bars: Any = None  # the main chart's closed bars and the EA's indicators (``LiveBars``)
        self.ea: ExpertAdvisor | None = None
        self.ctx: Any = None  # the EA's trade context
        self.periods: Any = None  # the backtest's retraining rule over the live bars
        self.forming: tuple[int, pd.Timestamp] | None = None  # the bar decided on and not closed yet
        self.decided: set[int] = set()  # bars whose on_bar finished (this session, or read back)
        self.last_refusal: str | None = None  # the quote refusal last journaled (not repeated)

    # -- terminal calls, surviving drops ---------------------------------------------------------------------
    def retrying(self, what: str, call: Callable[[], Any]) -> Any:
        wait = self.s.backoff_s
        while True:
            try:
                return call()
            except TerminalError as exc:
                if not self.started or not (exc.transient or isinstance(exc, TerminalConnectionError)):
                    raise  # a terminal that cannot be reached at the start is a setting to fix, not a drop
                self.summary.reconnects += 1
                log.warning("%s: %s; trying again in %.1f s", what, exc, wait)
                if self.journal is not None:
                    self.journal.write("reconnect", during=what, error=str(exc), wait_s=wait)
                self._sleep(wait)
                wait = min(max(wait * 2, 0.001), self.s.backoff_max_s)

    def terminal_account(self) -> Any:
        return self.retrying("reading the account", lambda: terminal_account(self.source))

    def refused_quote(self, exc: QuoteError, then: str) -> None:
        """Log and journal a refused quote (once while the same refusal repeats look after look)."""
        message = f"{exc}: {then}"
        if message != self.last_refusal:
            log.warning("%s", message)
            self.journal.write("warning", bar=self.bar(), message=message)
        self.last_refusal = message

    def journal_account(self, account: Callable[[], Any]) -> None:
        """Who the run is, for ``neuronet live report``: its magic number and the account it started on
        (``account``: the trade context's ``account``)."""
        acc = self.retrying("reading the account", account)
        who = self.terminal_account()
        self.journal.write(
            "account",
            magic=int(self.ea.magic),
            balance=acc.balance,
            currency=acc.currency,
            leverage=acc.leverage,
            login=int(who.login),
            server=str(who.server),
        )

    def record_trade(self, record: dict) -> None:
        """The terminal trade context's own records (requests sent, answers) go to the journal too, with
        the symbol of the request."""
        kind = "result" if "retcode" in record else "request"
        request = record.get("request", record)
        symbol = request.get("symbol") if isinstance(request, dict) else None
        self.journal.write(kind, source="terminal", symbol=symbol, terminal=record)  # nested: its own keys

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> LiveSummary:
        """Run until ``max_bars`` bars closed or Ctrl-C (re-raised after a clean stop); an existing journal
        of this run is resumed."""
        path = Path(self.s.journal)
        journal = Journal(path)  # new, or proven a journal: locked for this run, its last line made whole
        try:
            state = self.part.read_journal(path, JournalRecords(path)) if path.stat().st_size else None
            if state is not None and self.s.mode == "live":  # only on the account it was written on
                check_same_account(path, state.account, self.terminal_account(), "give a new --journal")
        except BaseException:
            journal.close()
            raise
        self.journal = journal
        try:
            self.part.begin(state)
            self._loop()
        except KeyboardInterrupt:
            self.summary.interrupted = True
            self._finish("interrupted")
            raise
        except Stop:
            self._finish("max_bars")
        except BaseException as exc:
            if isinstance(exc, EARuntimeError) and isinstance(exc.original, JournalError):
                exc = exc.original  # the journal could not be written while the EA traded: not the EA's fault
            try:
                self._finish(f"error: {type(exc).__name__}", deinit=not isinstance(exc, EARuntimeError))
            except JournalError:
                if not isinstance(exc, JournalError):
                    raise
            raise exc from None
        finally:
            self.journal.close()
        return self.summary

    def now(self) -> pd.Timestamp:
        return self.forming[1] if self.forming else self.bars.feed.time[-1]

    def bar(self) -> int:
        return self.forming[0] if self.forming else len(self.bars.feed) - 1

    def study(self, t: int, when: pd.Timestamp) -> None:
        """``on_study`` before bar ``t`` on the backtest's study window: every earlier bar, or the last
        ``study_bars``."""
        a, b = self.periods.study_range(t)
        call_hook(self.ea, "on_study", self.bars.feed.bars.window(a, b), where=f"before bar {t} ({when})",
                  bar=t, time=when)  # fmt: skip

    def count_closed(self) -> None:
        """One more bar closed: the run stops once ``max_bars`` did."""
        self.summary.bars_closed += 1
        if self.s.max_bars is not None and self.summary.bars_closed >= self.s.max_bars:
            raise Stop

    # -- bars ------------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            fetched = self.part.fetch_main(self.bars.feed.time[-1])
            self._resolve_lost()
            before = self.summary.missed + self.summary.skipped
            try:
                for when, row in fetched.frame.iterrows():
                    self.part.closed(when, row)
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
                self.part.open_new(fetched.final_until)
            elif self.forming is not None and self.ea.wants_ticks():
                self.part.on_tick()
            self._sleep(self.s.poll_s)

    def _resolve_lost(self) -> None:
        """The terminal answers again: look up the requests whose reply was lost while it could not be
        asked (``TerminalTrade.unresolved``), before the EA decides anything more; they were never sent
        twice, and now each is journaled as found or not executed. Still unreachable: the next look."""
        holder = self.part.terminal()
        if holder is None or not getattr(holder, "unresolved", None):
            return
        try:
            holder.resolve()
        except (TerminalError, QuoteError) as exc:
            log.warning("requests whose reply was lost cannot be looked up yet: %s", exc)

    def decide(self, t: int, when: pd.Timestamp, *, missed: bool = False) -> None:
        """``on_bar`` on bar ``t`` opened at ``when`` (retraining first where the backtest would). A bar
        that closed before it was decided on (``missed``): paper fills its requests at its open, as the
        backtest does; a live account cannot trade at that price any more (the terminal would fill every
        stale decision of a long stop at once, at the price now), so there its requests are refused with
        "no quotes" (``TerminalTrade.late``) and the account is left as it was."""
        self.forming = (t, when)
        self.part.show(when)
        if self.periods.retrains_at(t):  # walk-forward retraining, as the backtest
            self.study(t, when)
        late = self.part.terminal() if missed else None
        late = late if hasattr(late, "late") else None  # a live account's: paper fills at the bar's open
        if late is not None:
            late.late = LATE.format(when)
        try:
            self.ea.on_bar()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            name = type(self.ea).__name__
            raise EARuntimeError(name, "on_bar", f"at bar {t} ({when})", exc, t, when) from exc
        finally:
            if late is not None:
                late.late = None
            self.ctx.answers.done()  # a bar decided again is over: requests are sent again
        self.decided.add(t)
        self.summary.decisions += 1
        positions = self.part.positions()
        self.journal.write("decision", bar=t, time=when, **positions, retcode=self.ctx.last_retcode)

    # -- the stop --------------------------------------------------------------------------------------------
    def _finish(self, reason: str, deinit: bool = True) -> None:
        """Stop cleanly: positions left open unless ``close_on_exit``; ``on_deinit``; a stop record."""
        if self.ea is None or self.ctx is None or self.journal is None:  # stopped before on_init
            if self.journal is not None and self.begun:  # a new journal stays empty: a stop first in
                self.journal.write("stop", reason=reason, at=pd.Timestamp.now(tz="UTC"))  # it is no journal
            return
        closed = 0
        try:
            if self.s.close_on_exit and self.part.closing_quotes():
                closed = self.ctx.close(None, None)  # every number the EA used is its own
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
        says so (a resumed run looks them up again)."""
        holder = self.part.terminal()
        lost = sorted(getattr(holder, "unresolved", None) or ()) if holder is not None else []
        if lost:
            message = (
                f"stopping with {len(lost)} request(s) whose reply was lost and that the terminal does not "
                f"show yet ({', '.join(lost)}): check the terminal; a resumed run looks them up again"
            )
            log.warning("%s", message)
            self.journal.write("warning", bar=self.bar(), message=message)
