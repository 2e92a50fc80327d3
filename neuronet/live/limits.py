"""The safety limits of a live run, checked before every request reaches ``order_send``.

    limits = Limits(max_lots=0.5, max_positions=2, max_daily_loss=200.0, symbols=("EURUSD",),
                    kill_switch=Path("STOP"))

- ``max_lots``: the most lots one order may carry (after rounding to the symbol's step);
- ``max_positions``: open positions plus working pending orders of this EA (a pending order may become a
  position at any tick, so it counts before it does), plus the requests whose reply was lost and that the
  terminal has not shown yet (each may have opened a position: it counts until it is found or settled);
- ``max_daily_loss``: deposit currency; once today's P&L of this EA (``day_pnl``: counted from the start
  of the server day, so a position carried over midnight counts only what it made or lost since) reaches
  ``-max_daily_loss``, new orders are refused until the server day ends, even if the loss shrinks again
  (``TradeState.halted`` carries that; the journal carries the day through a restart); while a part of
  it cannot be known (no price at the day's start, no conversion), new orders are refused too;
- ``symbols``: the symbols orders may be placed on;
- ``kill_switch``: a file whose existence stops new orders (``touch STOP`` from another shell).

Limits refuse what adds risk: new positions and pending orders, and changes of a pending order's volume.
Closing, deleting pending orders and moving stops are always allowed, so a halted EA can still get flat.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from neuronet.errors import NeuronetError
from neuronet.live.day_pnl import DayPnl


class LimitsError(NeuronetError, ValueError):
    """A limit given to a live run is missing or not a usable value."""


@dataclass(frozen=True)
class Request:
    """What a limit looks at in a request that adds risk: the symbol and the lots it carries."""

    symbol: str
    lots: float


@dataclass(frozen=True)
class TradeState:
    """The EA's state when a request is checked: its open positions plus pending orders (``exposures``,
    of which ``unresolved`` are requests whose reply was lost, counted as open), today's P&L in deposit
    currency, whether the daily loss limit was already reached today, and today's server ``day`` (read
    from the requesting symbol's own checked quote: another symbol's garbage quote never refuses it);
    ``unknown``: why a part of today's P&L cannot be known (refused while there is any); ``account``: a
    multi-symbol run's whole account as this request read it, once (``AccountLimits.read``; required by
    ``AccountLimits.check``, unused by one symbol's ``Limits``)."""

    exposures: int
    day_pnl: float
    halted: bool = False
    unresolved: int = 0
    day: int | None = None
    unknown: tuple[str, ...] = ()
    account: AccountState | None = None


@dataclass(frozen=True)
class Limits:
    max_lots: float
    max_positions: int
    max_daily_loss: float
    symbols: tuple[str, ...]
    kill_switch: Path | None = None

    def __post_init__(self) -> None:
        for name in ("max_lots", "max_daily_loss"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value > 0)
            ):
                raise LimitsError(f"limit {name} must be a positive number, got {value!r}")
        if (
            isinstance(self.max_positions, bool)
            or not isinstance(self.max_positions, int)
            or (self.max_positions < 1)
        ):
            raise LimitsError(f"limit max_positions must be a whole number >= 1, got {self.max_positions!r}")
        symbols = (self.symbols,) if isinstance(self.symbols, str) else self.symbols
        try:
            symbols = tuple(str(s).strip() for s in symbols)
        except TypeError:
            raise LimitsError(f"limit symbols must be symbol names, got {self.symbols!r}") from None
        if not symbols or not all(symbols):
            raise LimitsError(f"limit symbols must name at least one symbol, got {self.symbols!r}")
        object.__setattr__(self, "symbols", symbols)
        if self.kill_switch is not None:
            if not str(self.kill_switch).strip():
                raise LimitsError("limit kill_switch must name a file (an empty path is the current folder)")
            path = Path(self.kill_switch)
            if path.is_dir():
                raise LimitsError(
                    f"limit kill_switch: {path} is a directory; name a file (its existence stops new orders)"
                )
            if not path.parent.is_dir():
                raise LimitsError(
                    f"limit kill_switch: the folder of {path} does not exist, so the file could never be "
                    "created there to stop trading"
                )
            object.__setattr__(self, "kill_switch", path)

    def check(self, request: Request, state: TradeState) -> str | None:
        """The reason ``request`` is refused, or None when every limit lets it through."""
        if self.kill_switch is not None and self.kill_switch.exists():
            return f"kill-switch file {self.kill_switch} exists: no new orders (closing is still allowed)"
        if state.halted or state.day_pnl <= -self.max_daily_loss:
            return (
                f"daily loss limit {self.max_daily_loss:g} reached (today's P&L {state.day_pnl:.2f}): "
                "no new orders until the server day ends"
            )
        if state.unknown:
            return f"today's P&L cannot be known ({'; '.join(state.unknown)}): no new orders"
        if request.symbol not in self.symbols:
            return f"symbol {request.symbol} is not among the allowed symbols {', '.join(self.symbols)}"
        if request.lots > self.max_lots + 1e-9:
            return f"{request.lots:g} lots exceed the limit of {self.max_lots:g} lots per order"
        if state.exposures >= self.max_positions:
            lost = (
                f" (counting {state.unresolved} request(s) whose reply was lost, not on the terminal yet)"
                if state.unresolved
                else ""
            )
            return (
                f"{state.exposures} open positions and pending orders already{lost}: the limit is "
                f"{self.max_positions}"
            )
        return None

    def daily_loss_reached(self, day_pnl: float) -> bool:
        return day_pnl <= -self.max_daily_loss

    def read(self, day: int) -> AccountState | None:
        """The account-wide side of a request's check on server ``day``: none for one symbol's run."""
        return None

    def to_dict(self) -> dict:
        """JSON-ready, for the journal's header."""
        return {
            "max_lots": self.max_lots,
            "max_positions": self.max_positions,
            "max_daily_loss": self.max_daily_loss,
            "symbols": list(self.symbols),
            "kill_switch": None if self.kill_switch is None else str(self.kill_switch),
        }


@dataclass(frozen=True)
class AccountState:
    """The whole account's side of the limits (every symbol of the run): its exposures (positions, pending
    orders and requests whose reply was lost), today's P&L in deposit currency, and whether the daily loss
    limit was reached today on any symbol (a halt of the account: it holds for every symbol until the
    server day ends, even if the loss shrinks); ``by_symbol``: each symbol's exposures of that same read,
    which a request's own symbol limit counts without reading its positions again."""

    exposures: int
    day_pnl: DayPnl
    halted: bool = False
    by_symbol: Mapping[str, int] = field(default_factory=dict)


class AccountLimits:
    """A multi-symbol run's limits: ``per_symbol`` (``Limits``: lots per order and positions per symbol,
    the allowed symbols, the kill switch) checked with the account's daily P&L, plus ``max_positions``
    across every symbol (None: no account-wide cap). ``state`` reads the account now (every symbol's
    trade context, on the server day given), so the daily loss halts every symbol at once, whichever lost;
    only ``read`` calls it, once per request, and ``check`` judges the reading it is given."""

    def __init__(
        self, per_symbol: Limits, max_positions: int | None, state: Callable[[int | None], AccountState]
    ):
        if max_positions is not None and (
            isinstance(max_positions, bool) or not isinstance(max_positions, int) or max_positions < 1
        ):
            raise LimitsError(
                f"limit max_account_positions must be a whole number >= 1, got {max_positions!r}"
            )
        self.per_symbol, self.max_positions, self._state = per_symbol, max_positions, state
        self.max_daily_loss = per_symbol.max_daily_loss

    def read(self, day: int) -> AccountState:
        """The whole account on server ``day``, read from the terminal once for a request: every symbol's
        positions, pending orders and requests whose reply was lost, its day's deals, and whether any
        symbol halted today. ``TerminalTrade`` reads it once, judges the day's halt by its P&L and gives it
        to ``check`` in ``TradeState.account``, so one request never asks the terminal for the account
        twice, nor judges two limits on two different reads.

        One read is as fresh as two: the read, the check and ``order_send`` run in the one thread that
        sends this run's requests, so nothing of this run changes the account between them; only the
        market (a stop hit, a pending order filled) or another program can, at any instant, just after
        a second read as easily as after the first. Each request reads again: no reading outlives the
        request it was made for."""
        return self._state(day)

    def check(self, request: Request, state: TradeState) -> str | None:
        """The reason ``request`` is refused, judged on ``state.account``: this request's one reading of
        the account (``read``). It is required: a check that read the account itself would judge the
        account-wide limits on another reading than the day's halt was judged on."""
        account = state.account
        if account is None:
            raise LimitsError(
                "an account-wide limit check needs the account as this request read it "
                "(TradeState.account, from AccountLimits.read); none was given, so nothing was judged"
            )
        halted = state.halted or account.halted
        pnl = account.day_pnl
        reason = self.per_symbol.check(
            request, replace(state, day_pnl=pnl.value, halted=halted, unknown=pnl.unknown)
        )
        if reason is not None:
            return reason
        if self.max_positions is not None and account.exposures >= self.max_positions:
            return (
                f"{account.exposures} open positions and pending orders on the account already: the "
                f"account-wide limit is {self.max_positions}"
            )
        return None

    def daily_loss_reached(self, day_pnl: float) -> bool:
        """``day_pnl``: the account's P&L of the day (``read``), not one symbol's."""
        return self.per_symbol.daily_loss_reached(day_pnl)

    def to_dict(self) -> dict:
        return {**self.per_symbol.to_dict(), "max_account_positions": self.max_positions}
