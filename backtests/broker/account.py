"""The account: balance, equity, margin, free margin and the stop-out.

Prices are whole points (``backtests.broker.market``); money is ``points x lots x per_point`` with
``per_point`` the contract size over the points in a price unit (1.0 for a 100,000-unit lot of a 5-digit
symbol). Equity is linear in the bid ``p`` (longs valued at ``p``, shorts at ``p`` + spread), so the margin
level at a range's adverse extreme is a few multiplications on cached sums, and the price where it crosses
the stop-out level solves one equation; the stop-out fills at the first whole point beyond it. The sums are
rebuilt only when the positions or the balance change (rare next to bars).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from backtests.broker.book import OpenPosition, OrderBook, Quote
from backtests.broker.config import AccountConfig
from backtests.broker.ledger import Ledger
from backtests.broker.margin import MarginModel

log = logging.getLogger("backtests.broker")


def cents(amount: float) -> float:
    """Money as a deal books it: whole cents of the deposit currency, half a cent away from zero (MQL5's
    NormalizeDouble to the account's currency digits; a billionth of a cent forgives float noise, so
    -0.035 = -0.034999... is -0.04). MetaTrader keeps every deal's profit, commission and swap so, and the
    balance is their sum."""
    return math.copysign(math.floor(abs(amount) * 100.0 + 0.5 + 1e-7) / 100.0, amount) + 0.0


Close = tuple[OpenPosition, float, str]  # a position to close, at what price, for what reason


class Account:
    """Balance and margin of one account over the order ``book`` of its symbol; every change of the
    balance is booked in ``ledger``."""

    def __init__(self, config: AccountConfig, ledger: Ledger, book: OrderBook, margin: MarginModel):
        self.balance = config.deposit
        self.leverage = config.leverage
        self.currency = config.currency
        self.per_point = config.contract_size / margin.scale  # money per point per lot
        self.stop_out_level = config.stop_out_level  # margin level in %, 0 = off
        self.ledger = ledger
        self.book = book
        self.margin = margin
        self._exposure: tuple[int, tuple[float, float, float, float, float]] | None = None
        # The stop-out's terms, valid while the balance stays (``charge`` drops them) and the book does not
        # change (``_terms_at``: its ``changes`` then).
        self._terms: tuple[float, float, float, float, float] | None = None
        self._terms_at = -1

    def charge(self, amount: float, t: int, swap: bool = False) -> None:
        """Add ``amount`` (negative: a cost) to the balance in bar ``t``: the money of the deal recorded next,
        or a ``swap`` at a rollover."""
        if amount:
            self.balance += amount
            self._terms = None
            self.ledger.balance(t, amount, swap)

    # -- equity and margin ---------------------------------------------------------------------------------
    def equity(self, bid: float, ask: float) -> float:
        """Balance plus floating profit at ``bid``/``ask`` (points; longs close at the bid, shorts at the
        ask)."""
        k = self.per_point
        return self.balance + sum(
            (bid - p.price) * p.lots * k if p.side > 0 else (p.price - ask) * p.lots * k
            for p in self.book.positions
        )

    def used_margin(self) -> float:
        return self.margin.of_positions(self.book.positions)

    def margin_ok(self, legs: list[tuple[int, float, float]], cost: float, bid: float, ask: float) -> bool:
        """Whether the free margin at ``bid``/``ask`` holds the positions ``legs`` (side, lots, price in
        points) a deal leaves open and its ``cost`` (the entry commission): equity - cost - their margin
        >= 0."""
        return self.equity(bid, ask) - cost - self.margin.of_legs(legs) >= -1e-9

    def exposure(self) -> tuple[float, float, float, float, float]:
        """Long lots, sum of long lots x price, the same for shorts, and the used margin."""
        changes = self.book.changes
        if self._exposure is None or self._exposure[0] != changes:
            sums = self.book.exposure()
            self._exposure = (changes, (*sums, self.margin.of_positions(self.book.positions)))
        return self._exposure[1]

    # -- the stop-out --------------------------------------------------------------------------------------
    def level_crossed(self, quote: Quote, at_open: bool) -> bool:
        """Whether the margin level at the quote's adverse extreme (or its open) is at the stop-out level.

        Runs twice a bar while positions are open: the terms of the linear equity are cached as Python
        floats until the positions or the balance change.
        """
        terms = self._terms
        if terms is None or self._terms_at != self.book.changes:
            terms = self._level_terms()
        margin, base, short_k, net_k, net = terms
        if margin <= 0:
            return False
        o, h, lo, spr = quote
        price = o if at_open or abs(net) < 1e-12 else lo if net > 0 else h  # hedged: no price moves it
        return base - short_k * spr + net_k * price <= 0.0

    def levels_crossed(self, lows: np.ndarray, highs: np.ndarray, spreads: np.ndarray) -> np.ndarray:
        """``level_crossed`` over many ranges at once (bids and spreads in points, one per range): whether
        each range's adverse extreme at its own spread reaches the stop-out level."""
        margin, base, short_k, net_k, net = self._level_terms()
        if margin <= 0:
            return np.zeros(len(lows), dtype=bool)
        price = 0.0 if abs(net) < 1e-12 else lows if net > 0 else highs  # hedged: no price moves it
        return base - short_k * spreads + net_k * price <= 0.0

    def stop_out_price(self, spread: float) -> float | None:
        """The bid at which the margin level would reach the stop-out level, None when no price does."""
        if not self.book.positions or self.stop_out_level <= 0:
            return None
        long_lots, long_value, short_lots, short_value, margin = self.exposure()
        net = long_lots - short_lots
        if margin <= 0 or abs(net) < 1e-12:
            return None
        k = self.per_point
        fixed = self.balance + k * (short_value - long_value - spread * short_lots)
        return (self.stop_out_level / 100.0 * margin - fixed) / (k * net)

    def stop_out_spread(self) -> float | None:
        """The spread at which the margin level reaches the stop-out level when no price moves it (every
        long hedged by a short: only the shorts' ask moves with the spread); None when none does."""
        margin, base, short_k, _, _ = self._level_terms()
        return base / short_k if margin > 0 and short_k > 0 else None

    def stop_out_step(self, quote: Quote, at_open: bool, when: pd.Timestamp, t: int) -> list[Close]:
        """What the stop-out closes next while the level is crossed on the quote's adverse path (down for a
        net long) in bar ``t``: the nearest stop-loss or take-profit met before the crossing price (a long's
        SL or a short's TP on the way down), else the most losing position at the first whole point beyond
        the crossing, or at the open when the open is already beyond it."""
        o, _, _, spr = quote
        k = self.per_point
        level = self.stop_out_level / 100.0
        long_lots, long_value, short_lots, short_value, margin = self.exposure()
        net = long_lots - short_lots
        fixed = self.balance + k * (short_value - long_value - spr * short_lots)
        if at_open or abs(net) < 1e-12:
            fill = o
        else:
            cross = (level * margin - fixed) / (k * net)
            # The first price on the grid at or beyond the crossing (1e-6 of a point forgives float noise).
            fill = min(o, math.floor(cross + 1e-6)) if net > 0 else max(o, math.ceil(cross - 1e-6))
            first = self._stops_before(fill, spr, net, t)
            if first:  # the nearest SL or TP on the way is reached before the stop-out
                return [max(first, key=lambda c: c[0])[1:]]
        equity = fixed + k * net * fill
        log.info("stop out at %s: margin level %.1f%%", when, 100 * equity / margin)
        # MetaTrader closes the most losing position first, then checks the level again (the caller loops):
        # its margin is released, so the others may stay open.
        worst = min(
            self.book.positions,
            key=lambda p: p.side * ((fill if p.side > 0 else fill + spr) - p.price) * p.lots,
        )
        return [(worst, fill if worst.side > 0 else fill + spr, "stop out")]

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
            long_lots, long_value, short_lots, short_value, margin = self.exposure()
            k = self.per_point
            base = self.balance + k * (short_value - long_value) - self.stop_out_level / 100.0 * margin
            net = long_lots - short_lots
            self._terms = (float(margin), float(base), float(k * short_lots), float(k * net), float(net))
            self._terms_at = self.book.changes
        return self._terms
