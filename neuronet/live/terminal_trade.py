"""The trading half of ``strategies.trade.TradeContext`` against a MetaTrader 5 terminal.

    source = TerminalSource("127.0.0.1", 18812)            # or TerminalSource() on Windows
    trade = TerminalTrade(source, "EURUSD", magic=20240101, limits=Limits(...), record=journal.write)

``link`` is anything with ``call(name, *args, **kwargs) -> (answer, last_error or None)``: a
``datafeeds.terminal.TerminalSource`` (reconnects after a drop: what a live run uses), or one of the
links of ``datafeeds.terminal_link``.

Each request is checked here first, with the backtest broker's checks (``backtests.checks``) and the
same retcodes: volume (10014), pending prices (10015), stops on the wrong side or nearer than the symbol's
stops level (10016), expiration (10022), no change (10025), freeze level (10029), unknown position
(10036), close volume (10038); then against the ``Limits`` (10027, "trading disabled on the client
side"). Only then does it go to the terminal (``TerminalRequests``: ``order_check``, ``order_send``,
requotes, lost replies). A refusal returns None/False/0, sets ``last_retcode``, is recorded and logged,
and never raises; reading the state (positions, orders, prices) on a terminal that cannot be reached
raises ``TerminalError``, since an empty answer would look like a flat account. Market orders, closes and
SL/TP changes are ``terminal_market``'s, pending orders ``terminal_orders``'; this module holds what they
share: the symbol, its quotes, the account's state, the limits and the local checks.

A volume that is not a whole number of the symbol's steps within its min/max is refused (10014), as the
paper account and the backtest refuse it: nothing is rounded or clamped (0.001 lots sent as 0.01 would be
ten times the risk asked for). The filling mode is the first the symbol allows of FOK, IOC
(``symbol_info().filling_mode``), else RETURN.

Quotes: every quote a request reads is checked (``quotes.quote_of``; with ``market``, the runner's
``QuoteBounds``, also its time against the bar the terminal is forming and its prices against the recent
bars). A request made at a refused quote is refused with "no quotes" (10021). The daily loss limit counts
by the server day of that bar, never by a quote's time alone (a quote stamped a day ahead would end the
day's halt early).
Positions and orders are those of this symbol whose magic number this context uses (the one it was given,
and any an order of this run carried), so a restarted EA adopts its own positions and leaves the others'.
Times are UTC, converted from broker time with ``clock``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from backtests import checks
from datafeeds.clock import BrokerClock
from datafeeds.terminal_errors import TerminalError, UnknownSymbolError
from neuronet.live import owned, retcodes
from neuronet.live.day_pnl import DayPnl, DayPnlReader
from neuronet.live.limits import Limits, Request, TradeState
from neuronet.live.lost_replies import LostReplies
from neuronet.live.quotes import QuoteBounds, QuoteError, quote_of
from neuronet.live.terminal_market import HEDGING, MarketOrders
from neuronet.live.terminal_orders import KINDS, SPECIFIED, PendingOrders
from neuronet.live.terminal_requests import (
    DEAL,
    Outcome,
    SymbolSpec,
    TerminalRequests,
    TradeSetupError,
    user_comment,
)
from strategies.trade import Account, Order, Position, net_volume

log = logging.getLogger(__name__)

TRADE_DISABLED, LONG_ONLY, SHORT_ONLY, CLOSE_ONLY = 0, 1, 2, 3  # symbol_info().trade_mode


class TerminalTrade(MarketOrders, PendingOrders, TerminalRequests):
    """Market and pending orders, closes and changes on a terminal, checked and limited (module docstring).

    Keywords: ``magic`` (this EA's number), ``limits`` (None: no limits, for a demo account or tests),
    ``deviation`` (points a market price may move before the request is refused), ``record`` (receives
    one JSON-ready dict per request, result and refusal), ``clock`` (the broker's server clock),
    ``bar_of`` (UTC time -> bar number, for ``Position.bar_open``; -1 without it), ``market`` (the
    runner's ``QuoteBounds`` of the moment, or None outside a run), ``retries``/``backoff`` (reads retried
    on a dropped link), ``requote_retries``, ``lost_reply_wait`` (seconds before the second look for a
    request whose reply was lost), ``lost_reply_settle`` (seconds after which such a request, never seen
    on a terminal that answered, is taken as not executed), ``monotonic`` (the clock that counts them).
    """

    def __init__(
        self,
        link: Any,
        symbol: str,
        *,
        magic: int,
        limits: Limits | None = None,
        deviation: int = 10,
        record: Callable[[dict], None] | None = None,
        clock: BrokerClock = BrokerClock(2.0, "us"),  # noqa: B008 - frozen dataclass, safe as a default
        bar_of: Callable[[pd.Timestamp], int] | None = None,
        retries: int = 3,
        backoff: float = 0.5,
        requote_retries: int = 3,
        lost_reply_wait: float = 1.0,
        lost_reply_settle: float = 300.0,
        monotonic: Callable[[], float] = time.monotonic,
        market: Callable[[], QuoteBounds | None] | None = None,
    ) -> None:
        if isinstance(magic, bool) or not isinstance(magic, (int, np.integer)) or magic < 1:
            raise TradeSetupError(
                f"magic must be a whole number >= 1, got {magic!r} (0 is what trades placed by hand carry)"
            )
        if isinstance(deviation, bool) or not isinstance(deviation, (int, np.integer)) or deviation < 0:
            raise TradeSetupError(f"deviation must be a whole number of points >= 0, got {deviation!r}")
        self.link, self.symbol, self.magic = link, str(symbol), int(magic)
        self.limits, self.deviation, self._record = limits, int(deviation), record
        self.clock, self.bar_of = clock, bar_of
        self.retries, self.backoff = int(retries), float(backoff)
        self.requote_retries = int(requote_retries)
        self.lost = LostReplies(
            self.symbol,
            self._read,
            self._note,
            wait=lost_reply_wait,
            settle=lost_reply_settle,
            monotonic=monotonic,
        )
        self.market = market
        self.last_retcode = 0
        self.magics = {self.magic}
        self._spec: SymbolSpec | None = None
        self._halted_day: int | None = None
        self._day = DayPnlReader(self._read, self.symbol, lambda o: self._note(owned.EVENT, **o.note()))
        self._unknown_said: set[tuple[int, str]] = set()  # (day, reason) already logged
        self._quote_time: int | None = None  # broker seconds of the last quote checked (a request's time)
        # Why every request is refused now (``quotes.refused_at_bad_quote``): the runner sets it while an
        # EA decides a bar that closed before it was decided on, whose open can no longer be traded.
        self.late: str | None = None

    # -- the symbol and the market ------------------------------------------------------------------------
    def spec(self, refresh: bool = False) -> SymbolSpec:
        """The symbol's trading conditions (read again with ``refresh``: brokers change stops levels)."""
        if self._spec is None or refresh:
            info = self._read("symbol_info", self.symbol, none_ok=True)
            if info is None:
                where = getattr(self.link, "where", "")
                raise UnknownSymbolError(
                    f"the terminal {where} has no symbol {self.symbol!r}".replace("  ", " ")
                )
            if self._spec is None:
                self._read("symbol_select", self.symbol, True)
            self._spec = SymbolSpec.from_info(info)
        return self._spec

    @property
    def point(self) -> float:
        return self.spec().point

    def _tick(self) -> Any:
        """The terminal's quote, checked (``quotes.quote_of``, and against the runner's ``market`` bounds
        when there are some): garbage is a ``QuoteError``."""
        tick = self._read("symbol_info_tick", self.symbol, none_ok=True)
        seconds, bid, ask = quote_of(self.symbol, tick)
        bounds = self.market() if self.market is not None else None
        if bounds is not None:
            bounds.check(self.symbol, self._utc(seconds), bid, ask)
        self._quote_time = seconds
        return tick

    def refuse_quote(self, action: str, exc: QuoteError) -> None:
        """A request made while the quote is garbage: refused with "no quotes", noted and logged."""
        self._refuse(action, retcodes.PRICE_OFF, str(exc))

    def price(self, side: int) -> float:
        """The current ask (``side`` +1, what a buy pays) or bid (-1)."""
        tick = self._tick()
        return float(tick.ask if side > 0 else tick.bid)

    def _utc(self, broker_seconds: int) -> pd.Timestamp:
        return pd.Timestamp(int(self.clock.to_utc_seconds(np.array([broker_seconds]))[0]), unit="s", tz="UTC")

    # -- state ----------------------------------------------------------------------------------------------
    def net_lots(self) -> float:
        """The net volume of this symbol's positions of the EA's magic numbers, read from the terminal."""
        return net_volume(self.positions())

    def positions(self) -> list[Position]:
        out = []
        for p in self._read("positions_get", symbol=self.symbol) or ():
            if p.symbol != self.symbol or p.magic not in self.magics:
                continue
            opened = self._utc(p.time)
            out.append(
                Position(
                    int(p.ticket),
                    +1 if p.type == 0 else -1,
                    float(p.volume),
                    float(p.price_open),
                    opened,
                    self.bar_of(opened) if self.bar_of else -1,
                    p.sl or None,
                    p.tp or None,
                    int(p.magic),
                    user_comment(p.comment),
                    float(p.profit) + float(p.swap),
                )
            )
        return out

    def orders(self) -> list[Order]:
        out = []
        for o in self._read("orders_get", symbol=self.symbol) or ():
            if o.symbol != self.symbol or o.magic not in self.magics or o.type not in KINDS:
                continue
            expiration = (
                self._utc(o.time_expiration) if o.type_time == SPECIFIED and o.time_expiration else None
            )
            out.append(
                Order(
                    int(o.ticket),
                    KINDS[o.type],
                    1 if o.type % 2 == 0 else -1,
                    float(o.volume_current),
                    float(o.price_open),
                    o.price_stoplimit or None,
                    o.sl or None,
                    o.tp or None,
                    expiration,
                    self._utc(o.time_setup),
                    int(o.magic),
                    user_comment(o.comment),
                )
            )
        return out

    def account(self) -> Account:
        a = self._read("account_info")
        return Account(
            float(a.balance),
            float(a.equity),
            float(a.margin),
            float(a.margin_free),
            float(a.leverage),
            str(a.currency),
        )

    def server_day(self) -> int:
        """The server day now (days since 1970 in broker time): that of the bar the terminal is forming
        (``market``), else of the quote's time; a checked quote either way."""
        seconds = int(self._tick().time)
        bounds = self.market() if self.market is not None else None
        if bounds is None:
            return seconds // 86400
        opened = int(self.clock.to_broker_seconds(np.array([bounds.bar_open.value // 10**9]))[0])
        return bounds.server_day(seconds, opened)

    def day_pnl(self, day: int | None = None) -> DayPnl:
        """The P&L of this EA on this symbol on server ``day`` (default: today, ``server_day``), counted
        from the start of that day (``day_pnl.DayPnlReader``: closed deals of the day, positions opened
        today whole, positions carried over midnight from their value at the day's start)."""
        return self._day.of(self.server_day() if day is None else int(day), self.magics)

    # -- limits ---------------------------------------------------------------------------------------------
    def _limit(self, lots: float) -> str | None:
        """The reason a request adding ``lots`` of risk is refused by the limits, or None."""
        if self.limits is None:
            return None
        self._look_up_lost()  # what the terminal now shows of them counts once, as positions and orders
        day = self.server_day()
        account = self.limits.read(day)  # a multi-symbol run's whole account, read once for this request
        figure = self.day_pnl(day) if account is None else account.day_pnl  # the account's, not the symbol's
        pnl = figure.value
        self._say_unknown(day, figure.unknown)
        if not figure.unknown and self.limits.daily_loss_reached(pnl) and self._halted_day != day:
            self._halted_day = day
            log.error(
                "%s: daily loss limit reached (today's P&L %.2f): no new orders today", self.symbol, pnl
            )
            self._note("halted", day_pnl=pnl, limit=self.limits.max_daily_loss, day=day)
        lost = self.lost.possibly_open()
        own = None if account is None else account.by_symbol.get(self.symbol)  # this request's one read
        held = self.exposures() if own is None else own
        state = TradeState(held, pnl, self._halted_day == day, lost, day, figure.unknown, account)
        return self.limits.check(Request(self.symbol, lots), state)

    def _say_unknown(self, day: int, unknown: tuple[str, ...]) -> None:
        """Log (and note) once per server day each reason today's P&L cannot be known."""
        for why in unknown:
            if (day, why) not in self._unknown_said:
                self._unknown_said.add((day, why))
                log.error("%s: today's P&L cannot be known (%s): new orders are refused", self.symbol, why)
                self._note("unknown day pnl", reason=why, day=day)

    def halted_on(self, day: int) -> bool:
        """Whether the daily loss limit was reached on server ``day`` by a request of this symbol."""
        return self._halted_day == int(day)

    def restore_magics(self, magics: Iterable[int]) -> None:
        """The magic numbers this symbol's requests carried before a restart (``sent_magic`` of the journal's
        notes): their positions and orders stay this EA's, counted by its limits and its day's P&L, as they
        were before the stop (a resumed run = an uninterrupted one)."""
        self.magics.update(int(m) for m in magics)

    def restore_owned(self, positions: Iterable[owned.Owned]) -> None:
        """The positions a stopped run saw open (the journal's "owned" notes, ``owned``): still known as its
        own, and how they opened, when the terminal's history no longer holds their opening deals."""
        self._day.restore(positions)

    def restore_halt(self, day: int) -> None:
        """The daily loss limit was reached on server ``day`` (days since 1970 in broker time) before a
        restart: no new orders until that day ends, whatever today's P&L reads now (the journal's
        "halted" record carries the day)."""
        self._halted_day = int(day)
        log.warning(
            "%s: the daily loss limit was reached earlier on this server day (%s): no new orders "
            "until it ends",
            self.symbol,
            pd.Timestamp(int(day) * 86400, unit="s").date(),
        )

    # -- requests whose reply was lost (``lost_replies``) --------------------------------------------------
    @property
    def unresolved(self) -> dict:
        """Request id -> request whose reply was lost and that the terminal has not shown yet."""
        return self.lost.unresolved

    def resolve(self) -> dict[str, Outcome | None]:
        """Look the unresolved requests up again (``LostReplies.resolve``): the runner calls it each poll."""
        return self.lost.resolve()

    def possibly_open(self) -> int:
        return self.lost.possibly_open()

    def exposures(self) -> int:
        """This symbol's positions and pending orders of the EA's magic numbers, read from the terminal,
        and its requests whose reply was lost (counted open): what ``max_positions`` counts."""
        return len(self.positions()) + len(self.orders()) + self.lost.possibly_open()

    def restore_unresolved(self, lost: dict[str, dict]) -> None:
        """Take over the requests a stopped run left unresolved (``LostReplies.restore``)."""
        self.lost.restore(lost)

    def _look_up_lost(self) -> None:
        """Look the unresolved requests up again (``LostReplies.resolve``); still unknown, they stay."""
        if self.lost.unresolved:
            try:
                self.lost.resolve()
            except (TerminalError, QuoteError) as exc:
                log.warning("%s: requests whose reply was lost cannot be looked up: %s", self.symbol, exc)

    def _only_reduces(self, side: int, volume: float) -> bool:
        """On a netting account, a market order against the position that does not reverse it only takes
        risk off: the limits let it through, as they let closes through. The market deals whose reply was
        lost may have filled or not: the order must only reduce the position in every case (a second
        ``sell`` after an unresolved one would otherwise open a short past the limits)."""
        if self.limits is None or int(self._read("account_info").margin_mode) == HEDGING:
            return False
        self._look_up_lost()
        net = sum(p.side * p.lots for p in self.positions())
        maybe = [
            (1 if lost.request.get("type") == 0 else -1) * float(lost.request.get("volume") or 0.0)
            for lost in self.lost.unresolved.values()
            if lost.request.get("action") == DEAL and lost.request.get("symbol", self.symbol) == self.symbol
        ]
        lo = net + sum(v for v in maybe if v < 0)  # every unresolved sell filled, no buy
        hi = net + sum(v for v in maybe if v > 0)
        nearest = lo if side < 0 else -hi  # the smallest position the order may meet, signed against it
        return nearest > 1e-9 and volume <= nearest + 1e-9

    # -- local checks ----------------------------------------------------------------------------------------
    @staticmethod
    def _volume(lots: float, spec: SymbolSpec) -> tuple[float, checks.Check]:
        """``lots`` as the request carries it, or the 10014 refusal: the backtest's volume check
        (``checks.check_volume``: positive, a whole number of steps, within min/max). A volume that passes
        is sent as that number of steps (a float32 0.1 goes as 0.1), never moved to another one."""
        if not checks.is_number(lots):
            return 0.0, (checks.INVALID_VOLUME, f"invalid volume {lots!r}: not a number of lots")
        bad = checks.check_volume(checks.real(lots), spec.volume_min, spec.volume_max, spec.volume_step)
        if bad:
            return 0.0, bad
        return round(round(lots / spec.volume_step) * spec.volume_step, 8), None

    def _mode_refusal(self, spec: SymbolSpec, side: int) -> tuple[int, str] | None:
        """What the symbol's trade mode refuses before any other check (a market without quotes is refused
        earlier, by ``_tick``)."""
        if spec.trade_mode == TRADE_DISABLED:
            return retcodes.TRADE_DISABLED, f"trading {self.symbol} is disabled"
        if spec.trade_mode == CLOSE_ONLY:
            return 10044, f"{self.symbol} accepts closing orders only"
        if (spec.trade_mode, side) in ((LONG_ONLY, -1), (SHORT_ONLY, +1)):
            return (10042 if side < 0 else 10043), f"{self.symbol} accepts one direction only"
        return None

    def _manual_magic(self, action: str, magic: int, desc: dict) -> bool:
        """A request carrying magic 0, the number of trades placed by hand, is refused (10013): taking that
        number would make the user's manual positions this EA's."""
        if int(magic) != 0:
            return False
        why = "magic number 0 is the one trades placed by hand carry; give the request the EA's own"
        self._refuse(action, checks.INVALID, why, **desc)
        return True

    def _base(self, magic: int, comment: str) -> dict:
        return {
            "symbol": self.symbol,
            "deviation": self.deviation,
            "magic": int(magic),
            "comment": str(comment),
        }
