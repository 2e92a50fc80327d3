"""An independent reference broker for the cross-checks: MetaTrader's documented rules, written out plainly
and slowly, sharing no code with ``backtests.broker``.

The rules (MetaTrader 5 Help, "Real and Generated Ticks" and "Generation of Ticks"; MQL5, "Order types"):

- prices are whole points (integers), as the tester keeps them; the ask is the bid plus the spread;
- "1 minute OHLC": each minute is walked open, low, high, close when it rises (close above open), open,
  high, low, close when it falls, and a doji (close = open) the other way than the last minute that moved;
  "a spread fixed in the appropriate bar is used" within a minute, so every price of a minute has its
  spread; between two prices the price moves straight, so a level it crosses is reached at the level, and
  a minute's open after the previous close is a jump;
- real ticks: every tick is a jump to its own bid and ask;
- at a jump an order reached fills at the price jumped to (a stop at the worse price, a limit at the
  better), and a stop-loss or take-profit reached closes there; on a straight move each fills at its own
  level, the nearer first (exits before entries at one level, then by ticket); a stop-loss or take-profit
  is a market order once reached, so a position whose stop the market had already passed when it was
  filled closes at once at the market;
- buy orders and shorts' stops compare the ask, the others the bid; longs close at the bid, shorts at the
  ask;
- an order is deleted once the time reaches its expiration;
- the EA decides at each bar's first price (its open: the first minute's open and spread, or the first
  tick); a hedging account, so every order is a position of its own.

Equity (balance plus every position's floating profit) is evaluated at every price walked, for the
drawdowns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MONEY_PER_POINT = 1.0  # 1 lot of EURUSD, 100,000 units: one point of 0.00001 is 1.00 USD


@dataclass
class Pending:
    ticket: int
    kind: str  # buy_limit, sell_limit, buy_stop, sell_stop
    lots: float
    price: int
    sl: int | None
    tp: int | None
    expiration: int | None  # UTC ns


@dataclass
class Position:
    ticket: int
    side: int
    lots: float
    price: int
    sl: int | None
    tp: int | None
    entry_ns: int


@dataclass
class Trade:
    ticket: int
    type: str
    lots: float
    entry_ns: int
    entry_price: int
    exit_ns: int
    exit_price: int
    reason: str
    profit: float


@dataclass
class ReferenceBroker:
    deposit: float
    commission: float = 0.0  # per lot per deal
    balance: float = field(init=False)
    orders: list[Pending] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)
    trades: list[Trade] = field(default_factory=list)
    equity: list[float] = field(default_factory=list)  # at every price walked, after what happened there
    ticket: int = 0
    now: int = 0

    def __post_init__(self) -> None:
        self.balance = self.deposit
        self.equity.append(self.deposit)

    # -- the EA's requests, at the bid and ask of the moment ----------------------------------------------
    def market(self, side: int, lots: float, sl: int | None, tp: int | None, bid: int, ask: int) -> int:
        self.ticket += 1
        self._open(self.ticket, side, lots, ask if side > 0 else bid, sl, tp)
        return self.ticket

    def pending(self, kind: str, lots: float, price: int, sl, tp, expiration: int | None) -> int:
        self.ticket += 1
        self.orders.append(Pending(self.ticket, kind, lots, price, sl, tp, expiration))
        return self.ticket

    def close(self, ticket: int, bid: int, ask: int) -> None:
        pos = next(p for p in self.positions if p.ticket == ticket)
        self._close(pos, bid if pos.side > 0 else ask, "signal")

    # -- walking prices --------------------------------------------------------------------------------------
    def expire(self, now: int) -> None:
        self.now = now
        self.orders = [o for o in self.orders if o.expiration is None or o.expiration > now]

    def jump(self, bid: int, ask: int, record: bool = True) -> None:
        """The price jumps to ``bid``/``ask``: orders and stops reached fill there (``record``: the equity
        there counts; not before the EA's decision at that same price)."""
        for o in list(self.orders):
            buy = o.kind.startswith("buy")
            at = ask if buy else bid
            stop = o.kind.endswith("stop")
            reached = (at >= o.price) if stop == buy else (at <= o.price)
            if reached:
                self.orders.remove(o)
                self._open(o.ticket, 1 if buy else -1, o.lots, at, o.sl, o.tp)
        for p in list(self.positions):
            at = bid if p.side > 0 else ask
            if p.sl is not None and (at <= p.sl if p.side > 0 else at >= p.sl):
                self._close(p, at, "sl")
            elif p.tp is not None and (at >= p.tp if p.side > 0 else at <= p.tp):
                self._close(p, at, "tp")
        if record:
            self.mark(bid, ask)

    def mark(self, bid: int, ask: int) -> None:
        """Equity at this price counts for the drawdowns."""
        self.equity.append(self._equity(bid, ask))

    def move(self, a: int, b: int, spread: int) -> None:
        """The bid moves straight from ``a`` to ``b`` (the ask with it, ``spread`` above): every level
        crossed fills at the level, the nearer first."""
        up, cur = b > a, a
        while True:
            events = self._events(cur, b, up, spread)
            if not events:
                break
            nearest = min(e[0] for e in events)
            for _, _, _, act in sorted(e for e in events if e[0] == nearest):
                act()
            cur = cur + nearest if up else cur - nearest
        self.equity.append(self._equity(b, b + spread))

    def _events(self, start: int, end: int, up: bool, spread: int) -> list:
        """(distance from ``start`` in bid points, 0 for an exit / 1 for an entry, ticket, action) of every
        level strictly beyond ``start`` and at or before ``end``."""
        out = []

        def within(level_bid: int) -> bool:
            return start < level_bid <= end if up else end <= level_bid < start

        for o in self.orders:
            buy = o.kind.startswith("buy")
            stop = o.kind.endswith("stop")
            if (stop == buy) != up:
                continue  # buy stop / sell limit are reached rising, the others falling
            level = o.price - (spread if buy else 0)
            if within(level):
                out.append((abs(level - start), 1, o.ticket, self._filler(o, level, spread)))
        for p in self.positions:
            shift = 0 if p.side > 0 else spread
            for level, reason in ((p.sl, "sl"), (p.tp, "tp")):
                if level is None:
                    continue
                rising = (reason == "tp") == (p.side > 0)  # a long's TP and a short's SL lie above
                if rising == up and within(level - shift):
                    out.append((abs(level - shift - start), 0, p.ticket, self._closer(p, level, reason)))
        return out

    def _filler(self, o: Pending, bid: int, spread: int):
        """Fill ``o`` at its price, the bid then at ``bid``: a stop it opens with that the market already
        passed there closes at once at the market (a triggered stop is a market order)."""

        def act():
            if o in self.orders:
                self.orders.remove(o)
                side = 1 if o.kind.startswith("buy") else -1
                self._open(o.ticket, side, o.lots, o.price, o.sl, o.tp)
                p = self.positions[-1]
                at = bid if side > 0 else bid + spread
                if p.sl is not None and (at <= p.sl if side > 0 else at >= p.sl):
                    self._close(p, at, "sl")
                elif p.tp is not None and (at >= p.tp if side > 0 else at <= p.tp):
                    self._close(p, at, "tp")

        return act

    def _closer(self, p: Position, level: int, reason: str):
        def act():
            if p in self.positions:
                self._close(p, level, reason)

        return act

    def finish(self, bid: int, ask: int) -> None:
        for p in list(self.positions):
            self._close(p, bid if p.side > 0 else ask, "end of test")

    # -- bookkeeping ---------------------------------------------------------------------------------------
    def _open(self, ticket, side, lots, price, sl, tp) -> None:
        self.balance -= lots * self.commission
        self.positions.append(Position(ticket, side, lots, price, sl, tp, self.now))

    def _close(self, p: Position, price: int, reason: str) -> None:
        self.ticket += 1  # the broker's closing order takes the account's next ticket
        profit = p.side * (price - p.price) * p.lots * MONEY_PER_POINT
        self.balance += profit - p.lots * self.commission
        self.positions.remove(p)
        kind = "buy" if p.side > 0 else "sell"
        self.trades.append(
            Trade(p.ticket, kind, p.lots, p.entry_ns, p.price, self.now, price, reason, profit)
        )

    def _equity(self, bid: int, ask: int) -> float:
        floating = sum(
            (bid - p.price if p.side > 0 else p.price - ask) * p.lots * MONEY_PER_POINT
            for p in self.positions
        )
        return self.balance + floating

    def max_drawdown(self) -> float:
        """The largest fall of equity from a peak, in money, over every price walked."""
        curve = np.array(self.equity)
        return float((np.maximum.accumulate(curve) - curve).max())


def minute_path(o: int, h: int, lo: int, c: int, previous_rose: bool) -> tuple[list[int], bool]:
    """A minute's four prices in the order MetaTrader generates them, and whether it counts as rising."""
    rising = c > o if c != o else not previous_rose
    return ([o, lo, h, c] if rising else [o, h, lo, c]), rising
