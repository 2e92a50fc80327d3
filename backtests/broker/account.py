"""The account: balance, equity, margin, free margin and the stop-out, over the order books of its symbols.

Prices are whole points (``backtests.broker.market``); a symbol's money is ``points x lots x per_point`` in
its profit currency, with ``per_point`` the contract size over the points in a price unit (1.0 for a
100,000-unit lot of a 5-digit symbol), converted into the deposit currency at the rate of the moment
(``backtests.broker.convert``). Each symbol's broker (``Broker``) is a *desk* of the account: its book, its
margin model, its conversion and its prices now (``price_points``).

One desk whose profit is in the deposit currency (EURUSD on a dollar account) takes the closed form: equity
is linear in the bid ``p`` (longs valued at ``p``, shorts at ``p`` + spread), so the margin level at a
range's adverse extreme is a few multiplications on cached sums, and the price where it crosses the
stop-out level solves one equation. Several desks, or a converted profit (USDJPY's yen), take the general
form: the equity is evaluated at the prices of the moment (the desk being worked at the price in question,
the others at theirs), and the crossing price is found by bisection on the desk's point grid. Both close
the most losing position of the account first and check the level again (MetaTrader 5 Help, "Margin
Call and Stop Out"); the stop-out fills at the first whole point beyond the crossing.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd

from backtests.broker.book import OpenPosition, Quote
from backtests.broker.config import AccountConfig
from backtests.broker.ledger import Ledger
from backtests.broker.screen import AccountScreen

log = logging.getLogger("backtests.broker")


def cents(amount: float) -> float:
    """Money as a deal books it: whole cents of the deposit currency, half a cent away from zero (MQL5's
    NormalizeDouble to the account's currency digits; a billionth of a cent forgives float noise, so
    -0.035 = -0.034999... is -0.04). MetaTrader keeps every deal's profit, commission and swap so, and the
    balance is their sum."""
    if not amount:  # no commission, no swap: most deals' parts (and never -0.0)
        return 0.0
    return math.copysign(math.floor(abs(amount) * 100.0 + 0.5 + 1e-7) / 100.0, amount) + 0.0


Close = tuple[Any, OpenPosition, float, str]  # the desk, the position to close, at what price, why


class Account:
    """Balance and margin of one account over its desks (``attach``); every change of the balance is
    booked in ``ledger``."""

    def __init__(self, config: AccountConfig, ledger: Ledger):
        self.balance = config.deposit
        # The swap accrued on the open positions (the sum of their ``POSITION_SWAP``): in the equity, the
        # margin level and the stop-out, on the balance only once the deal that closes a position books it.
        self.swap = 0.0
        self.leverage = config.leverage
        self.currency = config.currency
        self.stop_out_level = config.stop_out_level  # margin level in %, 0 = off
        self.ledger = ledger
        self.desks: list[Any] = []
        self.book = None  # the only desk's book and margin model while the closed form holds
        self.margin = None
        self.per_point = 0.0
        self.closed_form = False
        self.changes = 0  # counts changes of the balance (what is computed from it follows them)
        # Counts changes of the balance and of every desk's positions (each book tells it): what is computed
        # from the whole account (``ruled_out``) is current while it stays.
        self.revision = 0
        self._exposure: tuple[int, tuple[float, float, float, float, float]] | None = None
        # The stop-out's terms, valid while the balance stays (``charge`` drops them) and the book does not
        # change (``_terms_at``: its ``changes`` then).
        self._terms: tuple[float, float, float, float, float] | None = None
        self._terms_at = -1
        self._desk_margin: dict[int, tuple[int, float]] = {}  # id(desk) -> (its book's changes, margin)
        self.screen = AccountScreen(self)  # the cheap sufficient tests of the stop-out and the free margin
        # Off while a walk whose prices may leave the bars' own ranges (several symbols' ticks, each at its
        # last tick) checks every price itself: ``ruled_out`` then rules nothing out.
        self.screening = True

    def attach(self, desk: Any) -> None:
        """Add a symbol's broker to the account."""
        self.desks.append(desk)
        desk.book.account = self
        first = self.desks[0]
        self.closed_form = len(self.desks) == 1 and first.profit_rate.unity
        self.book, self.margin = first.book, first.margin
        self.per_point = first.config.contract_size / first.scale

    def refresh(self) -> None:
        """Re-choose the form once the desks' conversions are set (``backtests.broker.portfolio``)."""
        self.closed_form = len(self.desks) == 1 and self.desks[0].profit_rate.unity

    def charge(self, amount: float, t: int, swap: float = 0.0) -> None:
        """Add ``amount`` (negative: a cost) to the balance in bar ``t``: the money of the deal recorded next,
        of which ``swap`` is the accrued swap it books (``DEAL_SWAP`` of an exit: it leaves the positions'
        accrued swap for the balance, the equity stays)."""
        if amount:
            self.balance += amount
            self.changes += 1
            self.revision += 1
            self._terms = None
            self.ledger.balance(t, amount)
        if swap:
            self.swap = round(self.swap - swap, 2)  # a sum of whole cents: no float residue once all booked
            self.changes += 1
            self.revision += 1
            self._terms = None
            self.ledger.swap(t, -swap, booked=True)

    def accrue(self, amount: float, t: int, ns: int | None = None) -> None:
        """A rollover's swap in bar ``t`` (at UTC ``ns``, a midnight inside the bar; None: its open) on the
        open positions: MetaTrader keeps it on the position
        (``POSITION_SWAP``, part of its floating result, so in the equity and the margin level) until the deal
        that closes it books it to the balance (``charge``)."""
        if amount:
            self.swap = round(self.swap + amount, 2)
            self.changes += 1
            self.revision += 1
            self._terms = None
            self.ledger.swap(t, amount, ns=ns)

    # -- equity and margin ---------------------------------------------------------------------------------
    def equity(self, bid: float, ask: float, desk: Any = None) -> float:
        """Balance, accrued swap and floating profit with ``desk`` (default: the first) at ``bid``/``ask``
        (points; longs close at the bid, shorts at the ask) and every other desk at its prices now."""
        held = self.balance + self.swap  # the accrued swap is part of the positions' floating result
        if self.closed_form:
            k = self.per_point
            return held + sum(
                (bid - p.price) * p.lots * k if p.side > 0 else (p.price - ask) * p.lots * k
                for p in self.book.positions
            )
        desk = self.desks[0] if desk is None else desk
        return held + sum(
            d.floating(bid, ask) if d is desk else d.floating_now() for d in self.desks if d.book.positions
        )

    def equity_now(self) -> float:
        """Balance, accrued swap and every desk's floating profit at its prices now."""
        return self.balance + self.swap + sum(d.floating_now() for d in self.desks if d.book.positions)

    def used_margin(self) -> float:
        if self.closed_form:
            return self.margin.of_positions(self.book.positions)
        # Each desk's margin changes only with its positions (charged at their margin prices): kept per desk
        # until its book changes.
        total = 0.0
        for d in self.desks:
            if d.book.positions:
                total += self.margin_of(d)
        return total

    def margin_of(self, desk: Any) -> float:
        """``desk``'s margin, kept until its book changes."""
        book = desk.book
        held = self._desk_margin.get(id(desk))
        if held is None or held[0] != book.changes:
            held = self._desk_margin[id(desk)] = (book.changes, desk.margin.of_positions(book.positions))
        return held[1]

    def any_open(self) -> bool:
        """Whether any desk holds a position."""
        return any(d.book.positions for d in self.desks)

    def margin_ok(
        self, legs: list[tuple[int, float, float]], cost: float, bid: float, ask: float, desk: Any = None
    ) -> bool:
        """Whether the free margin at ``bid``/``ask`` holds the positions ``legs`` (side, lots, margin price)
        a deal on ``desk`` leaves open and its ``cost`` (the entry commission): equity - cost - the margin of
        every desk >= 0. Where the other desks at the worst of their bar leave the equity clear of that with
        room for any rounding (``AccountScreen.clear_of``), it holds without valuing their positions."""
        if self.closed_form:
            return self.equity(bid, ask) - cost - self.margin.of_legs(legs) >= -1e-9
        desk = self.desks[0] if desk is None else desk
        others = sum(self.margin_of(d) for d in self.desks if d is not desk and d.book.positions)
        held = desk.margin.of_legs(legs) + others
        if self.screen.clear_of(desk, bid, ask, cost + held):
            return True
        return self.equity(bid, ask, desk) - cost - held >= -1e-9

    def exposure(self) -> tuple[float, float, float, float, float]:
        """Long lots, sum of long lots x price, the same for shorts, and the used margin (the only desk)."""
        changes = self.book.changes
        if self._exposure is None or self._exposure[0] != changes:
            sums = self.book.exposure()
            self._exposure = (changes, (*sums, self.margin.of_positions(self.book.positions)))
        return self._exposure[1]

    # -- the stop-out --------------------------------------------------------------------------------------
    def level_crossed(self, quote: Quote, at_open: bool, desk: Any = None) -> bool:
        """Whether the margin level at the quote's adverse extreme (or its open) is at the stop-out level,
        ``desk`` working the quote and every other desk at its prices now.

        Runs twice a bar while positions are open: in the closed form the terms of the linear equity are
        cached as Python floats until the positions or the balance change.
        """
        if not self.closed_form:
            return self._crossed(desk, quote, at_open)
        terms = self._terms
        if terms is None or self._terms_at != self.book.changes:
            terms = self._level_terms()
        margin, base, short_k, net_k, net = terms
        if margin <= 0:
            return False
        o, h, lo, spr = quote
        price = o if at_open or abs(net) < 1e-12 else lo if net > 0 else h  # hedged: no price moves it
        return base - short_k * spr + net_k * price <= 0.0

    def calm_bounds(self, widest: float) -> tuple[float, float, float] | None:
        """The prices a quote must stay within for ``level_crossed`` to be false at it, in the closed form:
        ``(bid_low, bid_high, ask_high)``, each ruling out the stop-out while every bid is above
        ``bid_low`` and below ``bid_high`` and every ask below ``ask_high`` (``widest``: the widest spread
        a quote may have). None where it cannot tell (the general form, or a hedged account where only
        the spread moves the level).

        The level is linear in the adverse price (``level_crossed``): longs alone cross at a bid, shorts
        alone at an ask (their bid plus the spread), a mix at a bid with the shorts valued at the widest
        spread. The slack (a point, and a billionth of the terms' size in points) covers the rounding of
        the division and of ``level_crossed``'s own sum: the screen may look at a quiet quote, never pass
        a crossing one."""
        if not self.closed_form:
            return None
        margin, base, short_k, net_k, net = self._level_terms()
        inf = math.inf
        if margin <= 0:
            return -inf, inf, inf
        if abs(net) < 1e-12:
            return None
        if net_k == -short_k:  # shorts only: crossed where base - short_k * ask <= 0
            edge = base / short_k
            return -inf, inf, edge - _slack(edge, base, short_k)
        shorts = short_k * widest  # nothing for longs alone; a mix's shorts at the widest spread
        if net > 0:  # crossed where base - shorts + net_k * bid <= 0
            edge = (shorts - base) / net_k
            return edge + _slack(edge, abs(base) + shorts, net_k), inf, inf
        edge = (base - shorts) / -net_k  # crossed where base - shorts - |net_k| * bid <= 0
        return -inf, edge - _slack(edge, abs(base) + shorts, net_k), inf

    def levels_crossed(self, lows: np.ndarray, highs: np.ndarray, spreads: np.ndarray) -> np.ndarray:
        """``level_crossed`` over many ranges at once (bids and spreads in points, one per range): whether
        each range's adverse extreme at its own spread reaches the stop-out level."""
        if not self.closed_form:  # several symbols or a converted currency: every range is looked at
            return np.ones(len(lows), dtype=bool)
        margin, base, short_k, net_k, net = self._level_terms()
        if margin <= 0:
            return np.zeros(len(lows), dtype=bool)
        price = 0.0 if abs(net) < 1e-12 else lows if net > 0 else highs  # hedged: no price moves it
        return base - short_k * spreads + net_k * price <= 0.0

    def stop_out_price(self, spread: float, desk: Any = None) -> float | None:
        """The bid of ``desk`` at which the margin level would reach the stop-out level, None when no price
        does."""
        if self.stop_out_level <= 0:
            return None
        if not self.closed_form:
            return self._crossing(desk, spread)
        if not self.book.positions:
            return None
        long_lots, long_value, short_lots, short_value, margin = self.exposure()
        net = long_lots - short_lots
        if margin <= 0 or abs(net) < 1e-12:
            return None
        k = self.per_point
        fixed = self.balance + self.swap + k * (short_value - long_value - spread * short_lots)
        return (self.stop_out_level / 100.0 * margin - fixed) / (k * net)

    def stop_out_spread(self, desk: Any = None) -> float | None:
        """The spread at which the margin level reaches the stop-out level when no price moves it (every
        long hedged by a short: only the shorts' ask moves with the spread); None when none does."""
        if not self.closed_form:
            return self._spread_crossing(desk)
        margin, base, short_k, _, _ = self._level_terms()
        return base / short_k if margin > 0 and short_k > 0 else None

    def stop_out_step(
        self, quote: Quote, at_open: bool, when: pd.Timestamp, t: int, desk: Any = None
    ) -> list[Close]:
        """What the stop-out closes next while the level is crossed on the quote's adverse path (down for a
        net long) in bar ``t`` on ``desk`` (the symbol's broker): the nearest stop-loss or take-profit met
        before the crossing price (a long's SL or a short's TP on the way down), else the most losing
        position at the first whole point beyond the crossing, or at the open when the open is already
        beyond it."""
        desk = self.desks[0] if desk is None else desk
        if not self.closed_form:
            return self._general_step(desk, quote, at_open, when)
        o, _, _, spr = quote
        k = self.per_point
        level = self.stop_out_level / 100.0
        long_lots, long_value, short_lots, short_value, margin = self.exposure()
        net = long_lots - short_lots
        fixed = self.balance + self.swap + k * (short_value - long_value - spr * short_lots)
        if at_open or abs(net) < 1e-12:
            fill = o
        else:
            cross = (level * margin - fixed) / (k * net)
            # The first price on the grid at or beyond the crossing (1e-6 of a point forgives float noise).
            fill = min(o, math.floor(cross + 1e-6)) if net > 0 else max(o, math.ceil(cross - 1e-6))
            first = self._stops_before(fill, spr, net, t)
            if first:  # the nearest SL or TP on the way is reached before the stop-out
                return [(desk, *max(first, key=lambda c: c[0])[1:])]
        equity = fixed + k * net * fill
        log.info("stop out at %s: margin level %.1f%%", when, 100 * equity / margin)
        # MetaTrader closes the most losing position first, then checks the level again (the caller loops):
        # its margin is released, so the others may stay open.
        worst = min(
            self.book.positions,
            key=lambda p: p.side * ((fill if p.side > 0 else fill + spr) - p.price) * p.lots,
        )
        return [(desk, worst, fill if worst.side > 0 else fill + spr, "stop out")]

    def _stops_before(
        self, fill: float, spr: float, net: float, t: int
    ) -> list[tuple[float, OpenPosition, float, str]]:
        """(nearness, position, price, reason) of each SL and TP the bid meets on its way to ``fill``: down
        for a net long (longs' SLs at the bid, shorts' TPs at the ask), up for a net short; a TP from its
        ``tp_from`` bar on. Nearness grows towards the path's start, so the largest comes first."""
        down = net > 0
        out = []
        for p in self.book.positions:
            lift = 0.0 if p.side > 0 else spr  # a short's levels are asks: the bid meets them spr lower
            for level, reason in ((p.sl, "sl"), (p.tp, "tp")):
                if level is None or (reason == "tp" and t < p.tp_from):
                    continue
                if (reason == "sl") == (p.side > 0) and down and level - lift >= fill:
                    out.append((level - lift, p, level, reason))
                elif (reason == "sl") != (p.side > 0) and not down and level - lift <= fill:
                    out.append((lift - level, p, level, reason))
        return out

    def _level_terms(self) -> tuple[float, float, float, float, float]:
        """(margin, balance - value of the positions - stop-out equity, per_point x short lots, per_point x
        net lots, net lots), cached until the balance or the positions change."""
        if self._terms is None or self._terms_at != self.book.changes:
            positions = self.book.positions
            if len(positions) == 1:  # one position (every state of a reversing EA): its own sums, as
                p = positions[0]  # ``exposure`` adds them up from zero, without the caches between
                lots, value = p.lots, p.lots * p.price
                long_lots, long_value, short_lots, short_value = (
                    (lots, value, 0, 0) if p.side > 0 else (0, 0, lots, value)
                )
                margin = self.margin.of_positions(positions)
            else:
                long_lots, long_value, short_lots, short_value, margin = self.exposure()
            k = self.per_point
            base = (
                self.balance
                + self.swap
                + k * (short_value - long_value)
                - self.stop_out_level / 100.0 * margin
            )
            net = long_lots - short_lots
            self._terms = (float(margin), float(base), float(k * short_lots), float(k * net), float(net))
            self._terms_at = self.book.changes
        return self._terms

    # -- the general form: several desks, or a converted profit ---------------------------------------------
    def _surplus(self, desk: Any, bid: float, spread: float, margin: float) -> float:
        """Equity minus the stop-out equity with ``desk`` at ``bid`` (points) and ``spread``."""
        return self.equity(bid, bid + spread, desk) - self.stop_out_level / 100.0 * margin

    def ruled_out(self, t: int) -> bool:
        """Whether the stop-out cannot happen in bar ``t`` as the account stands (``AccountScreen``); off
        while a walk checks every price itself (``screening``)."""
        return self.screening and self.screen.ruled_out(t)

    def _crossed(self, desk: Any, quote: Quote, at_open: bool) -> bool:
        if self.ruled_out(desk.t):
            return False
        margin = self.used_margin()
        if margin <= 0:
            return False
        o, h, lo, spr = quote
        # The other desks at their prices now, once; this desk at the quote's open or at each extreme.
        rest = self.balance + self.swap - self.stop_out_level / 100.0 * margin
        rest += sum(d.floating_now() for d in self.desks if d is not desk and d.book.positions)
        if at_open:
            return rest + desk.floating(o, o + spr) <= 0.0
        return rest + min(desk.floating(lo, lo + spr), desk.floating(h, h + spr)) <= 0.0

    def _crossing(self, desk: Any, spread: float) -> float | None:
        """The bid of ``desk`` (points, a whole point) nearest its price now at which the level is reached
        on its adverse side, by bisection; None when its positions are hedged or no price reaches it."""
        margin = self.used_margin()
        net = sum(p.side * p.lots for p in desk.book.positions)
        if margin <= 0 or abs(net) < 1e-12:
            return None
        now = desk.price_points(-1)
        if self._surplus(desk, now, spread, margin) <= 0:
            return now
        far = 1.0 if net > 0 else now * 1000.0
        if self._surplus(desk, far, spread, margin) > 0:
            return None
        return _bisect(lambda p: self._surplus(desk, p, spread, margin) <= 0, now, far)

    def _spread_crossing(self, desk: Any) -> float | None:
        margin = self.used_margin()
        if margin <= 0 or not any(p.side < 0 for p in desk.book.positions):
            return None
        bid = desk.price_points(-1)
        if self._surplus(desk, bid, 0.0, margin) <= 0:
            return 0.0
        wide = bid * 10.0
        if self._surplus(desk, bid, wide, margin) > 0:
            return None
        return _bisect(lambda s: self._surplus(desk, bid, s, margin) <= 0, 0.0, wide)

    def _general_step(self, desk: Any, quote: Quote, at_open: bool, when: pd.Timestamp) -> list[Close]:
        o, h, lo, spr = quote
        margin = self.used_margin()
        net = sum(p.side * p.lots for p in desk.book.positions)
        fill = o
        if not at_open and self._surplus(desk, o, spr, margin) > 0:  # crossed inside the range
            far = lo if self._surplus(desk, lo, spr, margin) <= self._surplus(desk, h, spr, margin) else h
            fill = _bisect(lambda p: self._surplus(desk, p, spr, margin) <= 0, o, far)
            first = _stop_first(desk.book.positions, net, fill, spr) if abs(net) > 1e-12 else None
            if first is not None:
                return [(desk, first, first.sl, "sl")]
        equity = self.equity(fill, fill + spr, desk)
        log.info("stop out at %s: margin level %.1f%%", when, 100 * equity / margin if margin else math.inf)
        # The most losing position of the account, each valued in the deposit currency where it would close:
        # the working desk's at the fill, the others at their prices now.
        candidates = []
        for d in self.desks:
            for p in d.book.positions:
                if d is desk:
                    exit_ = fill if p.side > 0 else fill + spr
                    loss = d.position_profit(p, exit_, fill, fill + spr)
                else:
                    exit_ = d.price_points(-p.side)
                    loss = d.position_profit(p, exit_)
                candidates.append((loss, d, p, exit_))
        _, d, worst, exit_ = min(candidates, key=lambda c: c[0])
        return [(d, worst, exit_, "stop out")]


def _slack(edge: float, terms: float, per_price: float) -> float:
    """Points of slack around a stop-out price ``edge`` solved from money ``terms`` over ``per_price``
    (money per point): a point, plus a billionth of the terms and of the price, far above their rounding."""
    return 1.0 + 1e-9 * (abs(terms) / abs(per_price) + abs(edge))


def _stop_first(positions: list[OpenPosition], net: float, fill: float, spr: float) -> OpenPosition | None:
    """The stop-loss nearest on the adverse path that lies before the stop-out fill (longs' stops for a net
    long falling, shorts' for a net short rising), or None."""
    first = [
        p
        for p in positions
        if p.sl is not None and p.side * net > 0 and (p.sl >= fill if net > 0 else p.sl <= fill + spr)
    ]
    if not first:
        return None
    return max(first, key=lambda p: p.sl * (1 if net > 0 else -1))


def _bisect(reached, start: float, far: float) -> float:
    """The first whole point from ``start`` towards ``far`` at which ``reached`` holds (it holds at
    ``far``, not at ``start``): MetaTrader's stop-out fills at the first tick beyond the level."""
    a, b = float(start), float(round(far))
    step = 1.0 if b > a else -1.0
    while abs(b - a) > 1.0:
        mid = float(math.floor((a + b) / 2.0)) if step > 0 else float(math.ceil((a + b) / 2.0))
        if mid in (a, b):
            break
        if reached(mid):
            b = mid
        else:
            a = mid
    return b
