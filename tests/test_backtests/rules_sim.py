"""A second independent simulator of MetaTrader's rules for the cross-checks, sharing no code with
``backtests.broker`` nor with ``reference_broker``: every price the tester models is a tick.

Prices are whole points (MetaTrader's tester keeps them as integers), so a straight move of "1 minute
OHLC" from one price to the next passes every point between them: the M1 path is turned into ticks one
point apart (the minute's open a jump from the previous close), and then one rule serves every mode: at
each tick, the orders and stops it reaches fill at that tick's price (a level met on a straight move is met
exactly, so it fills at the level; a jump fills at the price jumped to). What this adds to the first
reference: netting as well as hedging, the stop-out (the most losing position first, then the margin level
again), hedged margin, commission, swaps at the server's midnight tripled on Wednesday (kept on the position,
in its equity, until the deal that closes it books its share: MQL5's ``POSITION_SWAP`` and ``DEAL_SWAP``),
refusals for want of free margin (a netting deal checked whole), and every deal's money booked in whole
cents.

The rules, from MetaTrader 5 Help ("Margin calculation", "Stop Out", "Generation of Ticks") and MQL5
("Order types"): buy orders and shorts' stops compare the ask, the rest the bid; longs close at the bid,
shorts at the ask; margin is lots x contract x opening price / leverage, and of a hedging account's long
and short volume the covered part is charged with the hedged margin at both legs' average price, the rest
at the larger leg's average price; at a margin level (equity / margin) at or below the stop-out level the
most losing position is closed at the market, and the level checked again.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

import numpy as np


@dataclass
class Pos:
    ticket: int
    side: int
    lots: float
    price: float  # points; a netting average may fall between points
    sl: int | None
    tp: int | None
    entry_ns: int
    commission: float = 0.0  # entry commission not yet attributed to a closed trade
    swap: float = 0.0


@dataclass
class Pend:
    ticket: int
    kind: str
    lots: float
    price: int
    sl: int | None
    tp: int | None
    expiration: int | None


@dataclass
class Closed:
    ticket: int
    side: int
    lots: float
    entry_ns: int
    entry_price: float
    exit_ns: int
    exit_price: int
    reason: str
    profit: float
    commission: float
    swap: float


@dataclass
class Rules:
    """Account settings: money per point per lot is ``contract / scale``."""

    deposit: float
    leverage: float = 100.0
    contract: float = 100_000.0
    scale: int = 100_000
    commission: float = 0.0
    hedging: bool = False
    stop_out: float = 50.0
    hedged: float | None = None  # units per lot the hedged volume is charged as (None: the contract)
    swap_long: float = 0.0  # points per lot per night
    swap_short: float = 0.0


@dataclass
class Sim:
    rules: Rules
    balance: float = field(init=False)
    positions: list[Pos] = field(default_factory=list)
    orders: list[Pend] = field(default_factory=list)
    trades: list[Closed] = field(default_factory=list)
    refused: list[tuple] = field(default_factory=list)
    equity: list[float] = field(default_factory=list)
    deal_balances: list[tuple[int, float]] = field(default_factory=list)  # (UTC ns, balance) after each deal
    ticket: int = 0
    now: int = 0
    bid: int = 0
    ask: int = 0
    day: int | None = None  # the server day of the last tick

    def __post_init__(self) -> None:
        self.balance = self.rules.deposit
        self.equity.append(self.balance)
        self.per_point = self.rules.contract / self.rules.scale

    # -- money -----------------------------------------------------------------------------------------------
    def floating(self, p: Pos) -> float:
        exit_ = self.bid if p.side > 0 else self.ask
        return p.side * (exit_ - p.price) * p.lots * self.per_point

    def equity_now(self) -> float:
        """The balance plus each open position's floating profit and accrued swap."""
        return self.balance + sum(self.floating(p) + p.swap for p in self.positions)

    def margin(self, legs: list[tuple[int, float, float]]) -> float:
        r = self.rules
        longs = [(lots, price) for side, lots, price in legs if side > 0 and lots > 0]
        shorts = [(lots, price) for side, lots, price in legs if side < 0 and lots > 0]
        lv, sv = sum(v for v, _ in longs), sum(v for v, _ in shorts)
        if not (lv and sv):
            return sum(v * r.contract * p / r.scale / r.leverage for v, p in longs + shorts)
        lavg = sum(v * p for v, p in longs) / lv
        savg = sum(v * p for v, p in shorts) / sv
        both = (lv * lavg + sv * savg) / (lv + sv)
        larger = lavg if lv >= sv else savg
        hedged = r.contract if r.hedged is None else r.hedged
        return (abs(lv - sv) * r.contract * larger + min(lv, sv) * hedged * both) / r.scale / r.leverage

    def used_margin(self) -> float:
        return self.margin([(p.side, p.lots, p.price) for p in self.positions])

    # -- the EA's requests -----------------------------------------------------------------------------------
    def market(self, side: int, lots: float, sl=None, tp=None) -> int | None:
        return self._deal(side, lots, self.ask if side > 0 else self.bid, sl, tp, None, "signal")

    def pending(self, kind: str, lots: float, price: int, sl=None, tp=None, expiration=None) -> int:
        self.ticket += 1
        self.orders.append(Pend(self.ticket, kind, lots, price, sl, tp, expiration))
        return self.ticket

    def close(self, ticket: int) -> None:
        pos = next(p for p in self.positions if p.ticket == ticket)
        self._close(pos, pos.lots, self.bid if pos.side > 0 else self.ask, "signal")

    # -- ticks -----------------------------------------------------------------------------------------------
    def tick(self, ns: int, bid: int, ask: int, day: int, record: bool = True) -> None:
        """The market is at ``bid``/``ask`` at UTC ``ns``, server day ``day``."""
        self.now, self.bid, self.ask = ns, bid, ask
        if self.day is not None and day != self.day and self.positions:
            nights = sum(
                3 if (d + 3) % 7 == 2 else 1 for d in range(self.day, day) if (d + 3) % 7 < 5
            )  # 1970-01-01 was a Thursday; Wednesday's rollover counts three nights, weekends none
            for p in self.positions:
                rate = self.rules.swap_long if p.side > 0 else self.rules.swap_short
                amount = to_cents(rate * nights * p.lots * self.per_point)
                p.swap += amount  # on the position: its closing deal books it
        self.day = day
        self.orders = [o for o in self.orders if o.expiration is None or o.expiration > ns]
        self._exits()
        for o in list(self.orders):
            buy = o.kind.startswith("buy")
            at = ask if buy else bid
            stop = o.kind.endswith("stop")
            if (at >= o.price) if stop == buy else (at <= o.price):
                self.orders.remove(o)
                self._deal(1 if buy else -1, o.lots, at, o.sl, o.tp, o.ticket, o.kind)
        self._exits()
        if record:
            self.equity.append(self.equity_now())

    def recheck(self) -> None:
        """The stops and the margin level again at the current prices, after the EA's requests there."""
        self._exits()

    def _exits(self) -> None:
        for p in list(self.positions):
            at = self.bid if p.side > 0 else self.ask
            if p.sl is not None and (at <= p.sl if p.side > 0 else at >= p.sl):
                self._close(p, p.lots, at, "sl")
            elif p.tp is not None and (at >= p.tp if p.side > 0 else at <= p.tp):
                self._close(p, p.lots, at, "tp")
        level = self.rules.stop_out / 100.0
        while self.positions and level > 0:
            margin = self.used_margin()
            if margin <= 0 or self.equity_now() > level * margin:
                break
            worst = min(self.positions, key=self.floating)
            self._close(worst, worst.lots, self.bid if worst.side > 0 else self.ask, "stop out")

    def finish(self) -> None:
        for p in list(self.positions):
            self._close(p, p.lots, self.bid if p.side > 0 else self.ask, "end of test")

    # -- bookkeeping -----------------------------------------------------------------------------------------
    def _deal(self, side, lots, price, sl, tp, ticket, reason) -> int | None:
        """A deal at ``price``: on a netting account it first reduces an opposite position (the trade's exit
        ``reason``: "signal", or the pending order's type); refused whole (nothing executed) when the free
        margin cannot hold what it leaves open."""
        r = self.rules
        opposite = [] if r.hedging else [p for p in self.positions if p.side != side]
        take = min(lots, opposite[0].lots) if opposite else 0.0
        rest = round(lots - take, 8)
        if rest > 0:
            legs = [(p.side, p.lots - (take if p in opposite else 0.0), p.price) for p in self.positions]
            legs.append((side, rest, price))
            if self.equity_now() - to_cents(rest * r.commission) - self.margin(legs) < -1e-9:
                self.refused.append((self.now, side, lots))
                return None
        if take:
            self._close(opposite[0], take, price, reason, own_order=False)
        if rest <= 0:
            return opposite[0].ticket
        comm = to_cents(rest * r.commission)
        self.balance -= comm
        self.deal_balances.append((self.now, self.balance))
        same = [] if r.hedging else [p for p in self.positions if p.side == side]
        if same:
            p = same[0]
            p.price = (p.price * p.lots + price * rest) / (p.lots + rest)
            p.lots = round(p.lots + rest, 8)
            p.commission += comm
            p.sl = p.sl if sl is None else sl
            p.tp = p.tp if tp is None else tp
            return p.ticket
        if ticket is None:
            self.ticket += 1
            ticket = self.ticket
        self.positions.append(Pos(ticket, side, rest, price, sl, tp, self.now, comm))
        return ticket

    def _close(self, p: Pos, lots: float, price: int, reason: str, own_order: bool = True) -> None:
        """Close ``lots`` of ``p``: by the server's own closing order, which takes the account's next ticket
        (SL, TP, stop-out, a close request, the end of the test), unless a deal's netting part closes it."""
        if own_order:
            self.ticket += 1
        share = lots / p.lots
        entry_comm, swap = to_cents(p.commission * share), to_cents(p.swap * share)
        exit_comm = to_cents(lots * self.rules.commission)
        profit = to_cents(p.side * (price - p.price) * lots * self.per_point)
        self.balance += profit - exit_comm + swap
        self.deal_balances.append((self.now, self.balance))
        self.trades.append(
            Closed(
                p.ticket,
                p.side,
                lots,
                p.entry_ns,
                p.price,
                self.now,
                price,
                reason,
                profit,
                -(entry_comm + exit_comm),
                swap,
            )
        )
        left = round(p.lots - lots, 8)
        if left <= 0:
            self.positions.remove(p)
        else:
            p.lots, p.commission, p.swap = left, p.commission - entry_comm, p.swap - swap

    def max_drawdown(self) -> float:
        curve = np.array(self.equity)
        return float((np.maximum.accumulate(curve) - curve).max())


def to_cents(amount: float) -> float:
    """A deal's money in whole cents, half a cent away from zero, as MetaTrader books it (exact decimals
    of the float's shortest repr: -0.034999... is -0.035, -0.04)."""
    step = Decimal(repr(amount)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return float(step)


def minute_ticks(o: int, h: int, lo: int, c: int, rose_before: bool) -> tuple[list[int], bool]:
    """A minute's bids one point apart, in the order MetaTrader generates its four prices (a rising minute
    open, low, high, close; a falling one open, high, low, close; a doji the other way than the last
    minute that moved), and whether it counts as rising."""
    rising = c > o if c != o else not rose_before
    corners = [o, lo, h, c] if rising else [o, h, lo, c]
    out = [o]
    for a, b in itertools.pairwise(corners):
        step = 1 if b > a else -1
        out.extend(range(a + step, b + step, step) if a != b else [])
    return out, rising
