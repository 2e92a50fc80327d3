"""A MetaTrader-style simulated broker: "open prices only", or "1 minute OHLC" with an M1 path attached.

Fill rules (one symbol, prices are bid prices as in MT5 bars):
- market orders fill at the current bar's open: buys at the ask (open + spread), sells at the bid (open);
  longs close at the bid, shorts at the ask;
- SL/TP are checked first against the open (a gap through the level fills at the open), then against the
  bar's high/low (a hit fills at the level); when both levels lie inside one bar the stop-loss is assumed
  to come first (pessimistic, as MetaTrader's tester and backtesting.py do);
- commission is money per lot per deal (charged on entry and on exit); swap is points per lot per night,
  tripled on one weekday and skipped at weekends;
- margin = lots * contract size * price / leverage; an opening order needing more than the free margin
  is rejected, as the terminal does (no partial fills). Volumes are checked against lot min/max/step.
- netting (one position per symbol, default) or hedging (each order its own position);
- stop-out: when the margin level falls to ``stop_out_level`` (50 % by default, a common broker setting),
  every position is closed at the price where the level was crossed: at the open when the open is already
  beyond it (a gap: only then can equity end below zero, as in MetaTrader), else at the crossing price
  inside the bar; stop-losses nearer to the open than that price are filled first;
- requests are checked as the trade server does (``backtests.checks``): volume, prices, stops level, freeze
  level, free margin; a refused request returns None/False and is recorded with MetaTrader's retcode;
- pending orders (``backtests.orders``) trigger on the open, then on the bar's range;
- with an M1 path (``backtests.paths``) the range checks follow the bar's minutes instead of its high/low.

Profits are in the quote currency, taken as the deposit currency (true for EURUSD on a USD account).
The equity curve is rebuilt after the run from position segments, so the per-bar loop stays cheap.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from backtests.errors import AccountError
from backtests.ledger import Ledger
from backtests.margin import MarginRules
from backtests.orders import PendingRules
from backtests.trading import TradeRequests


@dataclass(frozen=True)
class AccountConfig:
    """Account and symbol trading conditions (units in the names' comments)."""

    deposit: float = 10_000.0  # initial deposit, deposit currency
    currency: str = "USD"
    leverage: float = 100.0  # 1:leverage
    contract_size: float = 100_000.0  # units per lot
    lot_min: float = 0.01
    lot_max: float = 100.0
    lot_step: float = 0.01
    spread: int | None = None  # fixed spread in points; None = each bar's own spread
    missing_spread: int = 10  # points, where spread is None and the candles carry none (all 0)
    commission: float = 0.0  # money per lot per deal (entry and exit each)
    swap_long: float = 0.0  # points per lot per night
    swap_short: float = 0.0
    triple_swap_weekday: int = 2  # 0 = Monday; MT5 default Wednesday
    hedging: bool = False
    stop_out_level: float = 50.0  # margin level (equity / margin, %) that closes every position; 0 = off
    stops_level: int = 0  # minimal distance of SL/TP and pending prices from the market, points
    freeze_level: int = 0  # distance from the market within which orders and stops cannot be changed, points

    def __post_init__(self) -> None:
        checks = {
            "deposit": self.deposit > 0,
            "leverage": self.leverage > 0,
            "contract_size": self.contract_size > 0,
            "lot_min": self.lot_min > 0,
            "lot_max": self.lot_max >= self.lot_min,
            "lot_step": self.lot_step > 0,
            "spread": self.spread is None or self.spread >= 0,
            "missing_spread": self.missing_spread >= 0,
            "commission": self.commission >= 0,
            "triple_swap_weekday": 0 <= self.triple_swap_weekday <= 6,
            "stop_out_level": self.stop_out_level >= 0,
            "stops_level": self.stops_level >= 0,
            "freeze_level": self.freeze_level >= 0,
        }
        numbers = {k: v for k, v in asdict(self).items() if isinstance(v, (int, float)) and v is not None}
        checks.update({k: ok and math.isfinite(numbers.get(k, 0)) for k, ok in checks.items()})
        checks.update({k: math.isfinite(v) for k, v in numbers.items() if k not in checks})
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise AccountError(bad[0], getattr(self, bad[0]))

    def to_dict(self) -> dict:
        return asdict(self)


class OpenPosition:
    """The broker's record of one open position (mutable: stops move, partial closes shrink it); the EA sees
    frozen ``strategies.trade.Position`` copies. Public so that a live account's ledger can hand the broker
    the positions a terminal still holds at the end of a report."""

    __slots__ = (
        "bar",
        "comment",
        "commission",
        "entry_ns",
        "lots",
        "magic",
        "opened",
        "price",
        "seg",
        "side",
        "sl",
        "swap",
        "ticket",
        "tp",
        "tp_from",
    )

    def __init__(self, ticket, side, lots, price, bar, sl, tp, magic, comment, commission):
        self.ticket = ticket
        self.side = side
        self.lots = lots
        self.price = price
        self.bar = bar
        self.sl = sl
        self.tp = tp
        self.magic = magic
        self.comment = comment
        self.commission = commission  # entry commission not yet attributed to a closed trade
        self.swap = 0.0
        self.seg = bar  # bar where the current floating segment began
        self.tp_from = bar  # first bar whose range may reach the TP (see _trigger)
        self.entry_ns = None  # UTC ns of the minute or tick that filled it, None = the bar's open
        self.opened = None  # its opening time as a pd.Timestamp, made when an EA first asks


class Broker(TradeRequests, MarginRules, PendingRules, Ledger):
    """Positions, pending orders, fills and the account for one replay; the harness advances ``t`` bar by bar.

    The requests an EA makes (market and pending orders, closes, modifications) are ``TradeRequests``;
    margin and stop-out are ``MarginRules``', pending-order triggers ``PendingRules``', the result tables
    ``Ledger``'s. This class holds the state and the fill rules.
    """

    def __init__(
        self,
        open_: np.ndarray,
        high: np.ndarray,
        low: np.ndarray,
        close: np.ndarray,
        spread_points: np.ndarray,
        time: pd.DatetimeIndex,
        point: float,
        config: AccountConfig,
    ):
        self.config = config
        self.point = point
        self.opens, self.highs, self.lows, self.closes = open_, high, low, close
        n = len(open_)
        pts = np.asarray(spread_points, float)
        if config.spread is not None or not pts.any():
            pts = np.full(n, float(config.missing_spread if config.spread is None else config.spread))
        _check_prices(time, open_, high, low, close, pts)
        self.spread = pts * point  # price units
        self.time = time
        self._day = (time.as_unit("ns").asi8 // 86_400_000_000_000).astype(np.int64)
        self.t = 0
        self.balance = config.deposit
        self.open_positions: list[OpenPosition] = []
        self.pending_orders: list = []  # backtests.orders.Pending, by ticket
        self._next_ticket = 1
        self.trades: list[tuple] = []
        self.order_log: list[dict] = []
        self.deal_log: list[tuple] = []
        self._deal_ns: list[int | None] = []  # each deal's UTC ns inside its bar (see Ledger._times)
        self.rejected: list[dict] = []
        self.last_retcode = 0
        self._balance_events: list[tuple[int, float]] = []
        # (start_bar, end_bar, side, lots, price): floating P&L of a position state over bars [start, end)
        self._segments: list[tuple[int, int, int, float, float]] = []
        self._exposure_cache: tuple[float, float, float, float, float] | None = None
        self._level_terms: tuple[float, float, float, float] | None = None  # see _level_crossed
        self._stop_out_on = config.stop_out_level > 0
        self._swaps = bool(config.swap_long or config.swap_short)
        # Prices the checks read: (open, high, low, spread) of the bar, or of one stretch of an M1 path.
        self.quote = (open_[0], high[0], low[0], self.spread[0])
        self.price_path = None  # backtests.paths.M1Path ("1 minute OHLC") or backtests.ticks.TickPath
        self.walking = False  # True while a price path is walked: the order of prices inside it is known
        # Inside a bar: the tick being worked (its bid and ask are the market), or the UTC ns of the minute
        # being walked; the records take their times from these, so a fill shows when it happened.
        self.now = None  # strategies.trade.Tick
        self.now_ns: int | None = None
        self.revision = 0  # counts changes of positions and orders (a tick walk re-reads its levels then)

    @property
    def deals(self) -> int:
        """Number of deals (entries and exits), MetaTrader's "Total Deals"."""
        return len(self.deal_log)

    # -- prices ------------------------------------------------------------------------------------------
    def price(self, side: int) -> float:
        """Fill price at the current open for a deal in direction ``side`` (+1 buy at ask, -1 sell at bid)."""
        now = self.now
        if now is not None:  # a tick: (time_ns, bid, ask, ...)
            return now[2] if side > 0 else now[1]
        t = self.t
        return self.opens[t] + self.spread[t] if side > 0 else self.opens[t]

    def time_now(self) -> pd.Timestamp:
        """When the EA's decision is taken: the current tick's time, else the current bar's opening time."""
        ns = self.stamp()
        return self.time[self.t] if ns is None else pd.Timestamp(ns, tz="UTC")

    def stamp(self) -> int | None:
        """UTC ns of the tick or minute being worked; None at a bar's open (records use the bar's time)."""
        now = self.now
        return now[0] if now is not None else self.now_ns

    # -- per-bar events (called by the harness) -----------------------------------------------------------
    def bar_open(self, t: int) -> None:
        """Start of bar ``t``: swaps, stops gapped through, expiries and pending orders reached by the open,
        then the stop-out check at the open. On a tick path the open is the bar's first tick (its bid and
        ask are then the market for the EA's decision too)."""
        self.t = t
        self.now = self.now_ns = None
        path = self.price_path
        first = path.open_bar(self, t) if path is not None else None
        if not (self.open_positions or self.pending_orders):
            return
        if first is None:
            self.quote = (self.opens[t], self.highs[t], self.lows[t], self.spread[t])
        else:
            self.quote = first
        if self._swaps and self.open_positions and self._day[t] != self._day[t - 1]:
            self._swap(int(self._day[t - 1]), int(self._day[t]))
        if self.pending_orders:
            self.expire(t)
        self.at_open_checks(t)

    def bar_range(self, t: int) -> None:
        """During bar ``t``: pending orders reached by its high/low, the stop-out (with the stops nearer to
        the open before it), then the stops touched (including positions opened at this bar).

        With a price path attached (``attach_path``), the bar's minutes or ticks are walked instead; a tick
        path with an ``on_tick`` hook is walked even with nothing open (the hook runs on every tick).
        """
        path = self.price_path
        if path is not None and path.covers(t) and (self.open_positions or self.pending_orders or path.hook):
            path.walk(self, t)
            return
        if not (self.open_positions or self.pending_orders):
            return
        self.quote = (self.opens[t], self.highs[t], self.lows[t], self.spread[t])
        self.range_checks(t)

    def attach_path(self, path) -> None:
        """Work fills through M1 bars (``backtests.paths.M1Path``: MetaTrader's "1 minute OHLC" model) or
        ticks (``backtests.ticks.TickPath``: "Every tick based on real ticks")."""
        self.price_path = path

    def at_open_checks(self, t: int) -> None:
        """At an opening price (``quote``): pending orders reached, stops gapped through, the stop-out.

        Pending orders first: a position a gap fills at the open may already lie beyond its own SL or TP
        (a buy limit gapped below its stop-loss), and then closes at that open, not at the level.
        """
        if self.pending_orders:
            self._trigger(t, at_open=True)
        if self.open_positions:
            self._stops(t, gap_only=True)
        if self.open_positions and self._stop_out_on and self._level_crossed(t, at_open=True):
            self._stop_out(t, at_open=True)

    def range_checks(self, t: int) -> None:
        """Over a range of prices (``quote``): pending orders, the stop-out, then SL/TP.

        On an M1 path the range is a straight move ending at any pending price inside it, so the positions
        open before it are checked first and an order filled at its end is checked from there on.
        """
        if self.pending_orders and not self.walking:
            self._trigger(t, at_open=False)
        if self.open_positions:
            if self._stop_out_on and self._level_crossed(t, at_open=False):
                self._stop_out(t, at_open=False)
            self._stops(t, gap_only=False)
        if self.pending_orders and self.walking:
            self._trigger(t, at_open=False)

    def finish(self, last: int) -> None:
        """Close what is still open at the last bar's close (MetaTrader's "end of test" deals); pending
        orders are left unfilled and listed as cancelled."""
        self.t = last
        self.now = self.now_ns = None
        price_bid = self.closes[last]
        for pos in list(self.open_positions):
            price = price_bid if pos.side > 0 else price_bid + self.spread[last]
            self._close(pos, pos.lots, price, "end of test")
        for order in list(self.pending_orders):
            self._retire(order, "canceled")

    # -- fills ---------------------------------------------------------------------------------------------
    def _fill(self, side, lots, price, sl, tp, magic, comment, ticket=None, reason="signal") -> int | None:
        """A deal of ``lots`` at ``price``: netting first reduces or reverses an opposite position, hedging
        opens its own. Returns the position's ticket, or None when the free margin is short (recorded)."""
        cfg = self.config
        remaining = lots
        result = None
        if not cfg.hedging:
            for pos in [p for p in self.open_positions if p.side != side]:
                if remaining <= 1e-12:
                    break
                take = min(pos.lots, remaining)
                result = pos.ticket
                # Margin is released by the closing part, so only the opening remainder is checked below.
                self._close(pos, take, price, reason, order=ticket, record_order=False)
                remaining = round(remaining - take, 8)
            same = [p for p in self.open_positions if p.side == side]
            if remaining > 1e-12 and same:
                pos = same[0]
                if not self._margin_ok(remaining, price):
                    return self._reject("deal", side, remaining, 10019, "not enough free margin", price=price)
                self._end_segment(pos)
                total = pos.lots + remaining
                pos.price = (pos.price * pos.lots + price * remaining) / total
                pos.lots = round(total, 8)
                comm = remaining * cfg.commission
                pos.commission += comm
                self._charge(-comm)
                self._deal(ticket, pos, side, "in", remaining, price, 0.0 - comm, 0.0, 0.0)
                if sl is not None:
                    pos.sl = sl
                if tp is not None:
                    pos.tp = tp
                return pos.ticket
        if remaining <= 1e-12:
            return result  # the order only reduced or closed an opposite position
        if not self._margin_ok(remaining, price):
            return self._reject("deal", side, remaining, 10019, "not enough free margin", price=price)
        if ticket is None:
            ticket = self._next_ticket
            self._next_ticket += 1
        comm = remaining * cfg.commission
        pos = OpenPosition(ticket, side, remaining, price, self.t, sl, tp, magic, comment, comm)
        pos.entry_ns = self.stamp()
        self._charge(-comm)
        self.open_positions.append(pos)
        self._exposure_cache = self._level_terms = None
        self._deal(ticket, pos, side, "in", remaining, price, 0.0 - comm, 0.0, 0.0)  # 0.0 - x: never -0.0
        return pos.ticket

    def _close(
        self,
        pos: OpenPosition,
        lots: float,
        price: float,
        reason: str,
        order=None,
        record_order=True,
        entry="out",
    ) -> None:
        cfg = self.config
        self._end_segment(pos)
        share = lots / pos.lots
        entry_comm = pos.commission * share
        swap = pos.swap * share
        exit_comm = lots * cfg.commission
        profit = pos.side * (price - pos.price) * lots * cfg.contract_size
        self._charge(profit - exit_comm)
        if record_order:  # the broker's own closing order (SL, TP, stop-out, close request, end of test)
            self._order_record(
                None,
                "sell" if pos.side > 0 else "buy",
                lots,
                price,
                None,
                None,
                "filled",
                pos.ticket,
                pos.magic,
                reason,
            )
        self._deal(order, pos, -pos.side, entry, lots, price, 0.0 - exit_comm, swap, profit, reason)
        self.trades.append(
            (
                pos.ticket,
                "buy" if pos.side > 0 else "sell",
                lots,
                pos.entry_ns,  # UTC ns or None (the bar's time): trades_frame turns both into times
                pos.price,
                self.stamp(),
                price,
                pos.sl,
                pos.tp,
                reason,
                0.0 - (entry_comm + exit_comm),
                swap,
                profit,
                profit - entry_comm - exit_comm + swap,
                pos.bar,
                self.t,
                pos.magic,
                pos.comment,
            )
        )
        left = round(pos.lots - lots, 8)
        if left <= 1e-12:
            self.open_positions.remove(pos)
        else:
            pos.lots, pos.commission, pos.swap = left, pos.commission - entry_comm, pos.swap - swap

    def _stops(self, t: int, gap_only: bool) -> None:
        o, h, lo, spr = self.quote
        for pos in list(self.open_positions):
            if pos.sl is None and pos.tp is None:
                continue
            if pos.side > 0:  # long: exits at the bid
                if gap_only:
                    if pos.sl is not None and o <= pos.sl:
                        self._close(pos, pos.lots, o, "sl")
                    elif pos.tp is not None and o >= pos.tp:
                        self._close(pos, pos.lots, o, "tp")
                elif pos.sl is not None and lo <= pos.sl:
                    self._close(pos, pos.lots, pos.sl, "sl")
                elif pos.tp is not None and h >= pos.tp and t >= pos.tp_from:
                    self._close(pos, pos.lots, pos.tp, "tp")
            else:  # short: exits at the ask
                ao, ah, alo = o + spr, h + spr, lo + spr
                if gap_only:
                    if pos.sl is not None and ao >= pos.sl:
                        self._close(pos, pos.lots, ao, "sl")
                    elif pos.tp is not None and ao <= pos.tp:
                        self._close(pos, pos.lots, ao, "tp")
                elif pos.sl is not None and ah >= pos.sl:
                    self._close(pos, pos.lots, pos.sl, "sl")
                elif pos.tp is not None and alo <= pos.tp and t >= pos.tp_from:
                    self._close(pos, pos.lots, pos.tp, "tp")

    def _swap(self, day_from: int, day_to: int) -> None:
        cfg = self.config
        nights = 0
        for d in range(day_from, day_to):
            weekday = (d + 3) % 7  # 1970-01-01 was a Thursday (weekday 3)
            if weekday >= 5:
                continue
            nights += 3 if weekday == cfg.triple_swap_weekday else 1
        for pos in self.open_positions:
            rate = cfg.swap_long if pos.side > 0 else cfg.swap_short
            amount = rate * nights * pos.lots * self.point * cfg.contract_size
            pos.swap += amount
            self._charge(amount)

    # -- records and accounting ----------------------------------------------------------------------------
    def _charge(self, amount: float) -> None:
        if amount:
            self._level_terms = None
            self.balance += amount
            self._balance_events.append((self.t, amount))

    def _end_segment(self, pos: OpenPosition) -> None:
        """A position is about to change (volume, price, closed): close its floating-profit segment."""
        self._exposure_cache = self._level_terms = None
        end = self.t
        if end > pos.seg:
            self._segments.append((pos.seg, end, pos.side, pos.lots, pos.price))
        pos.seg = end


def _check_prices(time: pd.DatetimeIndex, o, h, lo, c, spread_points) -> None:
    """Refuse bars a fill could read garbage from: a NaN, infinite or non-positive price, a bad spread."""
    for name, values in (("open", o), ("high", h), ("low", lo), ("close", c), ("spread", spread_points)):
        values = np.asarray(values, dtype=float)
        bad = ~np.isfinite(values) | ((values < 0) if name == "spread" else (values <= 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"bar {i} ({time[i]}): {name} {values[i]} cannot be traded on")
