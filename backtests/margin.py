"""Margin, equity and the stop-out of the simulated broker (a mix-in of ``Broker``).

Equity is linear in the bid ``p`` (longs valued at ``p``, shorts at ``p`` + spread), so the margin level at
a range's adverse extreme is a few multiplications on cached sums, and the price where it crosses the
stop-out level solves one equation. The range and its open come from the broker's ``quote``.
"""

from __future__ import annotations

import logging

log = logging.getLogger("backtests.broker")


class MarginRules:
    """Free margin for new orders, equity at the current open, and the stop-out."""

    def _stop_out(self, t: int, at_open: bool) -> None:
        """Close everything where the margin level crosses ``stop_out_level``.

        Equity is linear in the bid ``p`` (shorts valued at ``p`` + spread), so the level is checked at the
        bar's adverse extreme (the open, at the open) with a few multiplications on cached sums, and the
        crossing price solves one equation. On the bar's adverse path (down for a net long) the stop-losses
        met before that price are filled first; then, if the level is still crossed, every position is
        closed there, or at the open when the open is already beyond it.
        """
        if not self._level_crossed(t, at_open):
            return
        o, _, _, spr = self.quote
        cs = self.config.contract_size
        level = self.config.stop_out_level / 100.0
        while self._level_crossed(t, at_open):
            long_lots, long_value, short_lots, short_value, margin = self._exposure()
            net = long_lots - short_lots
            fixed = self.balance + cs * (short_value - long_value - spr * short_lots)
            if at_open or abs(net) < 1e-12:
                fill = o
            else:
                cross = (level * margin - fixed) / (cs * net)
                fill = min(o, cross) if net > 0 else max(o, cross)
                first = [
                    p
                    for p in self.open_positions
                    if p.sl is not None
                    and p.side * net > 0
                    and (p.sl >= fill if net > 0 else p.sl <= fill + spr)
                ]
                if first:  # the nearest stop-loss on the way is reached before the stop-out
                    pos = max(first, key=lambda p: p.sl * (1 if net > 0 else -1))
                    self._close(pos, pos.lots, pos.sl, "sl")
                    continue
            equity = fixed + cs * net * fill
            log.info("stop out at %s: margin level %.1f%%", self.time[t], 100 * equity / margin)
            for pos in list(self.open_positions):
                self._close(pos, pos.lots, fill if pos.side > 0 else fill + spr, "stop out")

    def stop_out_price(self, spread: float) -> float | None:
        """The bid at which the margin level would reach the stop-out level, None when no price does."""
        if not self.open_positions or self.config.stop_out_level <= 0:
            return None
        long_lots, long_value, short_lots, short_value, margin = self._exposure()
        net = long_lots - short_lots
        if margin <= 0 or abs(net) < 1e-12:
            return None
        cs = self.config.contract_size
        fixed = self.balance + cs * (short_value - long_value - spread * short_lots)
        return (self.config.stop_out_level / 100.0 * margin - fixed) / (cs * net)

    def stop_out_spread(self) -> float | None:
        """The spread at which the margin level reaches the stop-out level when no price moves it (every
        long hedged by a short: only the shorts' ask moves with the spread); None when none does."""
        margin, base, short_cs, _ = self._level_terms or self._stop_out_terms()
        return base / short_cs if margin > 0 and short_cs > 0 else None

    def _level_crossed(self, t: int, at_open: bool) -> bool:
        """Whether the margin level at the bar's adverse extreme (or its open) is at the stop-out level.

        Runs twice a bar while positions are open: the terms of the linear equity are cached as Python
        floats until the positions or the balance change.
        """
        terms = self._level_terms or self._stop_out_terms()
        margin, base, short_cs, net_cs = terms
        if margin <= 0:
            return False
        o, h, lo, spr = self.quote
        price = o if at_open or abs(net_cs) < 1e-7 else lo if net_cs > 0 else h  # hedged: no price moves it
        return base - short_cs * spr + net_cs * price <= 0.0

    def _stop_out_terms(self) -> tuple[float, float, float, float]:
        """(margin, balance - value of the positions - stop-out equity, contract x short lots, x net lots)."""
        long_lots, long_value, short_lots, short_value, margin = self._exposure()
        cs = self.config.contract_size
        base = self.balance + cs * (short_value - long_value) - self.config.stop_out_level / 100.0 * margin
        self._level_terms = (
            float(margin),
            float(base),
            float(cs * short_lots),
            float(cs * (long_lots - short_lots)),
        )
        return self._level_terms

    def equity_now(self) -> float:
        """Balance plus floating profit at the current open (longs at the bid, shorts at the ask)."""
        bid, ask = self.price(-1), self.price(+1)  # the bar's open, or the tick being worked
        cs = self.config.contract_size
        return self.balance + sum(
            (bid - p.price) * p.lots * cs if p.side > 0 else (p.price - ask) * p.lots * cs
            for p in self.open_positions
        )

    def _exposure(self) -> tuple[float, float, float, float, float]:
        """Long lots, sum of long lots x price, the same for shorts, and the used margin.

        Equity is linear in these, so the per-bar stop-out check costs a few multiplications; the sums are
        cached and rebuilt only after positions change (rare next to bars).
        """
        if self._exposure_cache is None:
            lev, cs = self.config.leverage, self.config.contract_size
            longs = [(p.lots, p.price) for p in self.open_positions if p.side > 0]
            shorts = [(p.lots, p.price) for p in self.open_positions if p.side < 0]
            margin = sum(lots * cs * price / lev for lots, price in longs + shorts)
            self._exposure_cache = (
                sum(lots for lots, _ in longs),
                sum(lots * price for lots, price in longs),
                sum(lots for lots, _ in shorts),
                sum(lots * price for lots, price in shorts),
                margin,
            )
        return self._exposure_cache

    def margin_now(self) -> float:
        cs, lev = self.config.contract_size, self.config.leverage
        return sum(p.lots * cs * p.price / lev for p in self.open_positions)

    def _margin_ok(self, lots: float, price: float) -> bool:
        """The margin of the new volume and its entry commission fit in the free margin."""
        cfg = self.config
        need = lots * cfg.contract_size * price / cfg.leverage + lots * cfg.commission
        return need <= self.equity_now() - self.margin_now() + 1e-9

