"""The account's screens: cheap tests that tell, with room to spare, that a check of the whole account can
only say no (the stop-out) or yes (the free margin), so the check itself is skipped.

Both value each desk (a symbol's broker) at the worst of its prices: its longs at the lowest bid, its
shorts at the highest ask at the widest of its spreads (the bar's open and own spread, and the widest of
its minutes or ticks where a price path has them), over the open and the range (``_worst_prices``), from
the positions' sums the book keeps (``OrderBook.exposure``). A screen only ever rules work out: where it
cannot tell, the exact check runs as before, so a screened run gives the same
figures as one that checks everything (``tests/test_backtests/test_multi_calm.py``).

- The stop-out (``ruled_out``): the equity with every desk at the worst of the bar at once stays above the
  stop-out level with a tenth to spare for the conversions' moves. Where every desk holding positions
  has its profit in the deposit currency, the worst of a block of ``BLOCK`` bars is tried first: one
  answer then holds for the rest of the block while the account stands, so a bar costs one comparison.
  An answer holds until a position of any desk or the balance changes (``Account.revision``), so it is
  worked out once per state of the account, whatever the number of symbols asking.
- The free margin (``clear_of``): a deal is admitted without valuing the other desks' positions where
  their worst of the bar's block leaves the equity above what it needs, by more than any rounding of the
  sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BLOCK = 64  # bars of one block of the stop-out screen: a state of the account lasting a block costs one test


class AccountScreen:
    """The screens of one account (``backtests.broker.account.Account``; see the module docstring)."""

    def __init__(self, account: Any):
        self.account = account
        # The stop-out screen's last answer and what it holds for: (first bar, end bar, revision, answer)
        self._screened: tuple[int, int, int, bool] | None = None
        self._bar_worst: dict[int, tuple[int, int, float]] = {}  # id(desk) -> (bar, book changes, worst)
        self._block_worst: dict[int, tuple[int, int, float, float]] = {}  # id(desk) -> ``_block_terms``
        # id(desk) -> (block, book changes, its margin, its worst of the block): what ``_block_clear`` adds up
        # per desk, both fixed until its book changes or the block ends, read back in one look-up
        self._desk_terms: dict[int, tuple[int, int, float, float]] = {}
        # id(desk) -> (its prices' changes, worst bids, worst asks, and the same per block)
        self._prices: dict[int, tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    # -- the stop-out ----------------------------------------------------------------------------------------
    def ruled_out(self, t: int) -> bool:
        """Whether the stop-out cannot happen in bar ``t`` as the account stands (the module docstring)."""
        account = self.account
        held = self._screened
        revision = account.revision
        if held is not None and held[2] == revision and held[0] <= t < held[1]:
            return held[3]
        end = self._block_clear(t)
        if end:
            self._screened = (t, end, revision, True)
            return True
        margin = 0.0
        worst = account.balance + account.swap  # the positions' accrued swap is in the equity
        for d in account.desks:
            if d.book.positions:
                margin += account.margin_of(d)
                worst += self._worst_of(d, t)
        ruled = margin <= 0 or worst > 1.1 * account.stop_out_level / 100.0 * margin
        self._screened = (t, t + 1, revision, ruled)
        return ruled

    def _block_clear(self, t: int) -> int:
        """The end of bar ``t``'s block where the stop-out is ruled out for every bar of it (every desk at
        the worst of the block at once; only desks whose profit is in the deposit currency, whose worst
        does not move with another symbol's rate), else 0."""
        account = self.account
        block = t // BLOCK
        n = len(account.desks[0].market)  # the account's timeline: every desk's bars
        if t >= n:
            return 0
        margin = 0.0
        worst = account.balance + account.swap  # the positions' accrued swap is in the equity
        kept = self._desk_terms
        for d in account.desks:
            book = d.book
            if book.positions:
                held = kept.get(id(d))
                if held is None or held[0] != block or held[1] != book.changes:
                    if not d.money.profit.unity:
                        return 0
                    held = kept[id(d)] = (
                        block,
                        book.changes,
                        account.margin_of(d),
                        self._worst_in_block(d, block),
                    )
                margin += held[2]
                worst += held[3]
        if margin <= 0 or worst > 1.1 * account.stop_out_level / 100.0 * margin:
            return min((block + 1) * BLOCK, n)
        return 0

    def _worst_in_block(self, desk: Any, block: int) -> float:
        """``desk``'s floating profit at the worst of block ``block`` (profit in the deposit currency)."""
        return self._block_terms(desk, block)[2]

    def _block_terms(self, desk: Any, block: int) -> tuple[int, int, float, float]:
        """(block, book changes, ``_worst_in_block``, the size of the sums it came from), kept per desk."""
        book = desk.book
        held = self._block_worst.get(id(desk))
        if held is None or held[0] != block or held[1] != book.changes:
            _, _, _, lows, highs = self._worst_prices(desk)
            per_point = desk.money.per_point
            value = _floating_at(book, lows.item(block), highs.item(block), per_point)
            _, long_value, _, short_value = book.exposure()
            size = abs(value) + (abs(long_value) + abs(short_value)) * per_point
            held = self._block_worst[id(desk)] = (block, book.changes, value, size)
        return held

    def _worst_of(self, desk: Any, t: int) -> float:
        """``desk``'s floating profit at the worst of bar ``t``, deposit currency: kept for the bar until its
        book changes where it converts at its own prices (another symbol's rate moves inside the bar, so
        that desk's is worked out each time)."""
        book, money = desk.book, desk.money
        held = self._bar_worst.get(id(desk))
        if held is not None and held[0] == t and held[1] == book.changes:
            return held[2]
        _, lows, highs, _, _ = self._worst_prices(desk)
        low, high = lows.item(t), highs.item(t)
        amount = _floating_at(book, low, high, money.per_point)
        rate = money.profit
        reach = None if rate.unity else rate.reach(t)  # the converting pair moves in the bar too
        value = money.money(amount, low, high) if reach is None else rate.adverse(amount, *reach)
        if money.profit.pair is None:
            self._bar_worst[id(desk)] = (t, book.changes, value)
        return value

    def _worst_prices(self, desk: Any) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per bar of ``desk``, the lowest bid and the highest ask at the wider of its spreads, over its
        open and its range (points), and the same per block of ``BLOCK`` bars; made once per change of its
        prices."""
        m = desk.market
        held = self._prices.get(id(desk))
        if held is None or held[0] != m.changes:
            lows = np.minimum(m.o, m.lo)
            highs = np.maximum(m.o, m.h) + np.maximum(m.s_open, m.s_wide)  # a minute's or tick's spread too
            starts = np.arange(0, len(lows), BLOCK)
            block_lows = np.minimum.reduceat(lows, starts) if len(lows) else lows
            block_highs = np.maximum.reduceat(highs, starts) if len(highs) else highs
            held = self._prices[id(desk)] = (m.changes, lows, highs, block_lows, block_highs)
        return held

    # -- the free margin -------------------------------------------------------------------------------------
    def clear_of(self, desk: Any, bid: float, ask: float, need: float) -> bool:
        """Whether the equity surely exceeds ``need`` with ``desk`` at ``bid``/``ask``: every other desk
        holding positions is one whose prices now are its bar's open (open prices, no quote inside the
        bar) and whose profit is in the deposit currency, so its floating profit is at least its worst of
        the bar's block (kept with the stop-out screen's). A sufficient test only: a no here leaves the
        answer to the exact sum. The room (a billionth of every amount summed) is far above the rounding
        of either order of sums."""
        account = self.account
        t = desk.t
        block = t // BLOCK
        floor = account.balance + account.swap
        if desk.book.positions:
            floor += desk.floating(bid, ask)
        size = abs(floor) + abs(need) + 1.0
        for d in account.desks:
            if d is desk or not d.book.positions:
                continue
            if d.price_path is not None or d.now is not None or d.inside is not None or d.t != t:
                return False
            if not d.money.profit.unity:
                return False
            _, _, worst, sums = self._block_terms(d, block)  # no more than its worst of the bar
            floor += worst
            size += sums
        return floor - need > 1e-9 * size


def _floating_at(book: Any, low: float, high: float, per_point: float) -> float:
    """The book's positions' profit in their profit currency with longs at ``low`` and shorts at ``high``
    (points), from its sums: a screen's value, with room to spare for the other order of the sums."""
    long_lots, long_value, short_lots, short_value = book.exposure()
    return (low * long_lots - long_value + short_value - high * short_lots) * per_point
