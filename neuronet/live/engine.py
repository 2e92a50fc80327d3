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
journal, resume, the retries and the clock; the state both share (the bars, the EA, its context, ...) is one
record, ``shared_state.SharedState``, given to the part once with what the engine does for it
(``shared_state.Lifecycle``): ``Chart.attach``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalConnectionError, TerminalError
from neuronet.live.errors import JournalError, LiveError
from neuronet.live.identity import check_magic, check_same_account, terminal_account
from neuronet.live.journal import Journal, JournalRecords
from neuronet.live.quotes import QuoteError
from neuronet.live.shared_state import Lifecycle, LiveSettings, LiveSummary, SharedState
from strategies.base import ExpertAdvisor, call_hook
from strategies.errors import EARuntimeError

__all__ = ["Chart", "LiveEngine", "LiveSettings", "LiveSummary"]

log = logging.getLogger(__name__)


class Stop(Exception):
    """Internal: the run reached ``max_bars``."""


LATE = "bar {} closed before it was decided on: a live account cannot trade at its open"


class Chart(Protocol):
    """What a live run trades, given to the engine that runs it: one symbol (``runner.LiveRunner``) or
    several (``multi_runner.MultiLiveRunner``). The engine calls these and nothing else of it; the part
    reaches the engine only through what ``attach`` gives it, and sets the state both share there
    (``bars``, ``ea``, ``ctx``, ``periods``, ``forming``, ...)."""

    def attach(self, shared: SharedState, lifecycle: Lifecycle) -> None:
        """Given once, before anything else: the state the engine and the part share, and what the engine
        does for the part."""

    def read_journal(self, path: Path, records: JournalRecords) -> Any:
        """The state to resume from (``account``: the account it was written on); another run's: refused."""

    def begin(self, state: Any) -> None:
        """A new run's history journaled or the journal's ``state`` taken back; the EA built and started."""

    def fetch_main(self, after: pd.Timestamp | None) -> Any:
        """The main chart's bars closed after ``after`` (``market_bar`` set to the bar forming)."""

    def closed(self, when: pd.Timestamp, row: pd.Series) -> None:
        """The main chart's bar opened at ``when`` closed with ``row`` (the engine counts it then)."""

    def open_new(self, when: pd.Timestamp) -> None:
        """The main chart's bar forming at ``when`` begins: decide on it at the terminal's quotes."""

    def on_tick(self) -> None:
        """New quotes inside the bar forming: ``on_tick``."""

    def close_on_exit(self) -> int:
        """``--close-on-exit``: close the EA's positions and say how many; on paper at the quotes then, set
        on the account, and only where they are good (a symbol whose quote is refused is left open)."""

    def show(self, when: pd.Timestamp) -> None:
        """What the EA sees before deciding on the bar opened at ``when``."""

    def positions(self) -> dict:
        """A decision record's net position(s)."""

    def terminal(self) -> Any:
        """The live trade context (None on paper): ``late``, ``unresolved`` and ``resolve`` are its."""


class LiveEngine:
    """The shared lifecycle (see the module docstring) of ``ea_class(**params)`` on ``source``, trading
    what ``part`` says (``Chart``), which it gives the shared state (``shared``) and itself as the part's
    ``Lifecycle`` once, here.

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
        self._sleep = sleep or time.sleep
        self.shared = SharedState(
            ea_class=ea_class,
            params=dict(params),
            source=source,
            settings=settings,
            trading_factory=trading,
            summary=LiveSummary(settings.journal),
        )
        self.part.attach(self.shared, self)

    # -- terminal calls, surviving drops ---------------------------------------------------------------------
    def retrying(self, what: str, call: Callable[[], Any]) -> Any:
        run = self.shared
        wait = run.settings.backoff_s
        while True:
            try:
                return call()
            except TerminalError as exc:
                if not run.started or not (exc.transient or isinstance(exc, TerminalConnectionError)):
                    raise  # a terminal that cannot be reached at the start is a setting to fix, not a drop
                run.summary.reconnects += 1
                log.warning("%s: %s; trying again in %.1f s", what, exc, wait)
                if run.journal is not None:
                    run.journal.write("reconnect", during=what, error=str(exc), wait_s=wait)
                self._sleep(wait)
                wait = min(max(wait * 2, 0.001), run.settings.backoff_max_s)

    def terminal_account(self) -> Any:
        return self.retrying("reading the account", lambda: terminal_account(self.shared.source))

    def refused_quote(self, exc: QuoteError, then: str) -> None:
        """Log and journal a refused quote (once while the same refusal repeats look after look)."""
        run = self.shared
        message = f"{exc}: {then}"
        if message != run.last_refusal:
            log.warning("%s", message)
            run.journal.write("warning", bar=run.bar(), message=message)
        run.last_refusal = message

    def journal_account(self, account: Callable[[], Any]) -> None:
        """Who the run is, for ``neuronet live report``: its magic number and the account it started on
        (``account``: the trade context's ``account``)."""
        acc = self.retrying("reading the account", account)
        who = self.terminal_account()
        self.shared.journal.write(
            "account",
            magic=int(self.shared.ea.magic),
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
        self.shared.journal.write(
            kind, source="terminal", symbol=symbol, terminal=record
        )  # nested: its own keys

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> LiveSummary:
        """Run until ``max_bars`` bars closed or Ctrl-C (re-raised after a clean stop); an existing journal
        of this run is resumed."""
        run = self.shared
        path = Path(run.settings.journal)
        journal = Journal(path)  # new, or proven a journal: locked for this run, its last line made whole
        try:
            state = self.part.read_journal(path, JournalRecords(path)) if path.stat().st_size else None
            if state is not None and run.settings.mode == "live":  # only on the account it was written on
                check_same_account(path, state.account, self.terminal_account(), "give a new --journal")
        except BaseException:
            journal.close()
            raise
        run.journal = journal
        try:
            self.part.begin(state)
            self._loop()
        except KeyboardInterrupt:
            run.summary.interrupted = True
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
            run.journal.close()
        return run.summary

    def study(self, t: int, when: pd.Timestamp) -> None:
        """``on_study`` before bar ``t`` on the backtest's study window: every earlier bar, or the last
        ``study_bars``."""
        run = self.shared
        a, b = run.periods.study_range(t)
        call_hook(run.ea, "on_study", run.bars.feed.bars.window(a, b), where=f"before bar {t} ({when})",
                  bar=t, time=when)  # fmt: skip

    def _count_closed(self) -> None:
        """One more bar closed: the run stops once ``max_bars`` did."""
        summary, most = self.shared.summary, self.shared.settings.max_bars
        summary.bars_closed += 1
        if most is not None and summary.bars_closed >= most:
            raise Stop

    # -- bars ------------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        run = self.shared
        while True:
            fetched = self.part.fetch_main(run.bars.feed.time[-1])
            self._resolve_lost()
            before = run.summary.missed + run.summary.skipped
            try:
                for when, row in fetched.frame.iterrows():
                    self.part.closed(when, row)
                    self._count_closed()
            finally:
                late = run.summary.missed + run.summary.skipped - before
                if late:
                    what = "skipped (no on_bar)" if run.settings.skip_missed else "processed in order"
                    log.warning(
                        "%d bars closed before they were decided on (terminal unreachable or quote refused): "
                        "%s",
                        late,
                        what,
                    )
            if run.forming is None and fetched.final_until > run.bars.feed.time[-1]:
                self.part.open_new(fetched.final_until)
            elif run.forming is not None and run.ea.wants_ticks():
                self.part.on_tick()
            self._sleep(run.settings.poll_s)

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
        run = self.shared
        run.forming = (t, when)
        self.part.show(when)
        if run.periods.retrains_at(t):  # walk-forward retraining, as the backtest
            self.study(t, when)
        late = self.part.terminal() if missed else None
        late = late if hasattr(late, "late") else None  # a live account's: paper fills at the bar's open
        if late is not None:
            late.late = LATE.format(when)
        try:
            run.ea.on_bar()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            name = type(run.ea).__name__
            raise EARuntimeError(name, "on_bar", f"at bar {t} ({when})", exc, t, when) from exc
        finally:
            if late is not None:
                late.late = None
            run.ctx.answers.done()  # a bar decided again is over: requests are sent again
        run.decided.add(t)
        run.summary.decisions += 1
        positions = self.part.positions()
        run.journal.write("decision", bar=t, time=when, **positions, retcode=run.ctx.last_retcode)

    # -- the stop --------------------------------------------------------------------------------------------
    def _finish(self, reason: str, deinit: bool = True) -> None:
        """Stop cleanly: positions left open unless ``close_on_exit``; ``on_deinit``; a stop record."""
        run = self.shared
        if run.ea is None or run.ctx is None or run.journal is None:  # stopped before on_init
            if run.journal is not None and run.begun:  # a new journal stays empty: a stop first in
                run.journal.write("stop", reason=reason, at=pd.Timestamp.now(tz="UTC"))  # it is no journal
            return
        closed = 0
        try:
            if run.settings.close_on_exit:
                closed = self.part.close_on_exit()
            if deinit:
                run.ea.mark_run(
                    complete=reason == "max_bars", interrupted=None if reason == "max_bars" else reason
                )
                call_hook(run.ea, "on_deinit", where="at the stop")
        finally:
            self._warn_unresolved()
            run.journal.write("stop", reason=reason, closed_on_exit=closed, at=pd.Timestamp.now(tz="UTC"))

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
            self.shared.journal.write("warning", bar=self.shared.bar(), message=message)
