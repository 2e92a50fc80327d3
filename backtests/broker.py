"""A MetaTrader-style simulated broker for the "open prices only" model.

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
- stop-out: when the margin level at a bar's worst prices falls to ``stop_out_level`` (50 % by default,
  a common broker setting), every position is closed at those prices.

Profits are in the quote currency, taken as the deposit currency (true for EURUSD on a USD account).
The equity curve is rebuilt after the run from position segments, so the per-bar loop stays cheap.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from strategies.base import Account, Position

log = logging.getLogger(__name__)

TRADE_COLUMNS = (
    "ticket",
    "type",
    "lots",
    "entry_time",
    "entry_price",
    "exit_time",
    "exit_price",
    "sl",
    "tp",
    "exit_reason",
    "commission",
    "swap",
    "profit",
    "net_profit",
    "entry_bar",
    "exit_bar",
    "magic",
    "comment",
)


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
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid account setting {bad[0]}={getattr(self, bad[0])!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class _Pos:
    __slots__ = (
        "bar",
        "comment",
        "commission",
        "lots",
        "magic",
        "price",
        "seg",
        "side",
        "sl",
        "swap",
        "ticket",
        "tp",
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


class Broker:
    """Positions, fills and the account for one replay; the harness advances ``t`` bar by bar."""

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
        self.spread = pts * point  # price units
        self.time = time
        self._day = (time.as_unit("ns").asi8 // 86_400_000_000_000).astype(np.int64)
        self.t = 0
        self.balance = config.deposit
        self.open_positions: list[_Pos] = []
        self._next_ticket = 1
        self.trades: list[tuple] = []
        self.deals = 0
        self.rejected: list[dict] = []
        self._balance_events: list[tuple[int, float]] = []
        # (start_bar, end_bar, side, lots, price): floating P&L of a position state over bars [start, end)
        self._segments: list[tuple[int, int, int, float, float]] = []
        self._exposure_cache: tuple[float, float, float, float, float] | None = None

    # -- prices ------------------------------------------------------------------------------------------
    def price(self, side: int) -> float:
        """Fill price at the current open for a deal in direction ``side`` (+1 buy at ask, -1 sell at bid)."""
        t = self.t
        return self.opens[t] + self.spread[t] if side > 0 else self.opens[t]

    # -- TradeContext --------------------------------------------------------------------------------------
    def order(self, side: int, lots: float, sl: float | None, tp: float | None, magic: int, comment: str):
        """Market order now; returns the ticket of the position opened or changed, None when rejected."""
        cfg = self.config
        steps = round(lots / cfg.lot_step)
        norm = round(steps * cfg.lot_step, 8)
        if not (cfg.lot_min - 1e-9 <= norm <= cfg.lot_max + 1e-9) or abs(norm - lots) > 1e-9:
            return self._reject(
                side,
                lots,
                f"invalid volume {lots} (min {cfg.lot_min}, max {cfg.lot_max}, step {cfg.lot_step})",
            )
        price = self.price(side)
        remaining = norm
        ticket = None
        if not cfg.hedging:
            for pos in [p for p in self.open_positions if p.side != side]:
                if remaining <= 1e-12:
                    break
                take = min(pos.lots, remaining)
                ticket = pos.ticket
                # Margin is released by the closing part, so only the opening remainder is checked below.
                self._close(pos, take, self.price(-pos.side), "signal")
                remaining = round(remaining - take, 8)
            same = [p for p in self.open_positions if p.side == side]
            if remaining > 1e-12 and same:
                pos = same[0]
                if not self._margin_ok(remaining, price):
                    return self._reject(side, remaining, "not enough free margin")
                self._end_segment(pos)
                total = pos.lots + remaining
                pos.price = (pos.price * pos.lots + price * remaining) / total
                pos.lots = round(total, 8)
                pos.commission += remaining * cfg.commission
                self._charge(-remaining * cfg.commission)
                self.deals += 1
                if sl is not None:
                    pos.sl = sl
                if tp is not None:
                    pos.tp = tp
                return pos.ticket
        if remaining <= 1e-12:
            return ticket  # the order only reduced or closed an opposite position
        if not self._margin_ok(remaining, price):
            return self._reject(side, remaining, "not enough free margin")
        pos = _Pos(
            self._next_ticket,
            side,
            remaining,
            price,
            self.t,
            sl,
            tp,
            magic,
            comment,
            remaining * cfg.commission,
        )
        self._next_ticket += 1
        self._charge(-remaining * cfg.commission)
        self.deals += 1
        self.open_positions.append(pos)
        self._exposure_cache = None
        return pos.ticket

    def close(self, ticket: int | None, magic: int | None) -> int:
        todo = [
            p
            for p in self.open_positions
            if (ticket is None or p.ticket == ticket) and (magic is None or p.magic == magic)
        ]
        for pos in todo:
            self._close(pos, pos.lots, self.price(-pos.side), "signal")
        return len(todo)

    def positions(self) -> list[Position]:
        t = self.t
        ref = self.closes[t - 1] if t > 0 else self.opens[t]
        spr = self.spread[t - 1] if t > 0 else self.spread[t]
        out = []
        for p in self.open_positions:
            exit_price = ref if p.side > 0 else ref + spr
            out.append(
                Position(
                    p.ticket,
                    p.side,
                    p.lots,
                    p.price,
                    self.time[p.bar],
                    p.bar,
                    p.sl,
                    p.tp,
                    p.magic,
                    p.comment,
                    p.side * (exit_price - p.price) * p.lots * self.config.contract_size,
                )
            )
        return out

    def account(self) -> Account:
        equity = self.equity_now()
        margin = self.margin_now()
        return Account(
            self.balance, equity, margin, equity - margin, self.config.leverage, self.config.currency
        )

    # -- per-bar events (called by the harness) -----------------------------------------------------------
    def bar_open(self, t: int) -> None:
        """Start of bar ``t``: overnight swaps, then stops gapped through by the open."""
        self.t = t
        if self.open_positions:
            if self._day[t] != self._day[t - 1] and (self.config.swap_long or self.config.swap_short):
                self._swap(int(self._day[t - 1]), int(self._day[t]))
            self._stops(t, gap_only=True)

    def bar_range(self, t: int) -> None:
        """During bar ``t``: stops touched by its high/low (including positions opened at this open), then
        the stop-out check at the bar's worst prices."""
        if self.open_positions:
            self._stops(t, gap_only=False)
            if self.open_positions and self.config.stop_out_level > 0:
                self._stop_out(t)

    def _stop_out(self, t: int) -> None:
        """Close everything when the margin level at the bar's worst prices falls to the stop-out level.

        Longs are valued at the bar's low (bid), shorts at its high plus spread (ask), and closed there:
        the bar does not say when the level was crossed, so the fill is the pessimistic one.
        """
        long_lots, long_value, short_lots, short_value, margin = self._exposure()
        if margin <= 0:
            return
        low, high_ask = self.lows[t], self.highs[t] + self.spread[t]
        cs = self.config.contract_size
        worst = self.balance + cs * (low * long_lots - long_value + short_value - high_ask * short_lots)
        if worst / margin * 100.0 <= self.config.stop_out_level:
            log.info("stop out at %s: margin level %.1f%%", self.time[t], worst / margin * 100.0)
            for pos in list(self.open_positions):
                self._close(pos, pos.lots, low if pos.side > 0 else high_ask, "stop out")

    def finish(self, last: int) -> None:
        """Close what is still open at the last bar's close (MetaTrader's "end of test" deals)."""
        self.t = last
        price_bid = self.closes[last]
        for pos in list(self.open_positions):
            price = price_bid if pos.side > 0 else price_bid + self.spread[last]
            self._close(pos, pos.lots, price, "end of test")

    # -- internals ----------------------------------------------------------------------------------------
    def _reject(self, side: int, lots: float, reason: str) -> None:
        self.rejected.append(
            {"time": str(self.time[self.t]), "bar": self.t, "side": side, "lots": lots, "reason": reason}
        )
        log.info("order rejected at %s: %s", self.time[self.t], reason)
        return None

    def _charge(self, amount: float) -> None:
        if amount:
            self.balance += amount
            self._balance_events.append((self.t, amount))

    def equity_now(self) -> float:
        """Balance plus floating profit at the current open (longs at the bid, shorts at the ask)."""
        t = self.t
        bid, ask = self.opens[t], self.opens[t] + self.spread[t]
        cs = self.config.contract_size
        return self.balance + sum(
            (bid - p.price) * p.lots * cs if p.side > 0 else (p.price - ask) * p.lots * cs
            for p in self.open_positions
        )

    def _exposure(self) -> tuple[float, float, float, float, float]:
        """Long lots, sum of long lots x price, the same for shorts, and the used margin.

        Worst-case equity is linear in these, so the per-bar stop-out check costs a few multiplications;
        the sums are cached and rebuilt only after positions change (rare next to bars).
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
        need = lots * self.config.contract_size * price / self.config.leverage
        return need <= self.equity_now() - self.margin_now() + 1e-9

    def _end_segment(self, pos: _Pos) -> None:
        """A position is about to change (volume, price, closed): close its floating-profit segment."""
        self._exposure_cache = None
        end = self.t
        if end > pos.seg:
            self._segments.append((pos.seg, end, pos.side, pos.lots, pos.price))
        pos.seg = end

    def _close(self, pos: _Pos, lots: float, price: float, reason: str) -> None:
        cfg = self.config
        self._end_segment(pos)
        share = lots / pos.lots
        entry_comm = pos.commission * share
        swap = pos.swap * share
        exit_comm = lots * cfg.commission
        profit = pos.side * (price - pos.price) * lots * cfg.contract_size
        self._charge(profit - exit_comm)
        self.deals += 1
        self.trades.append(
            (
                pos.ticket,
                "buy" if pos.side > 0 else "sell",
                lots,
                None,  # entry and exit times are filled in by trades_frame, in one vectorised lookup
                pos.price,
                None,
                price,
                pos.sl,
                pos.tp,
                reason,
                -(entry_comm + exit_comm),
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
        o, h, lo, spr = self.opens[t], self.highs[t], self.lows[t], self.spread[t]
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
                elif pos.tp is not None and h >= pos.tp:
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
                elif pos.tp is not None and alo <= pos.tp:
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

    # -- results -------------------------------------------------------------------------------------------
    def trades_frame(self) -> pd.DataFrame:
        """Closed trades in closing order, with MAE/MFE: the worst and best floating profit while open.

        Excursions use the high/low of the bars from entry up to (not including) the exit bar, longs at the
        bid and shorts at the ask, plus the exit price: in the exit bar the stop or take-profit is taken to
        come first (the pessimistic rule), so that bar's range beyond the exit level does not count.
        """
        df = pd.DataFrame(self.trades, columns=list(TRADE_COLUMNS))
        df["entry_time"] = self.time[df["entry_bar"].to_numpy(dtype=np.int64)]
        df["exit_time"] = self.time[df["exit_bar"].to_numpy(dtype=np.int64)]
        cs = self.config.contract_size
        mae, mfe = np.zeros(len(df)), np.zeros(len(df))
        for k, (side, lots, entry, exit_, a, b) in enumerate(
            zip(
                df["type"],
                df["lots"],
                df["entry_price"],
                df["exit_price"],
                df["entry_bar"],
                df["exit_bar"],
                strict=True,
            )
        ):
            spr = self.spread[a:b] if side == "sell" else 0.0
            lows = np.append(self.lows[a:b] + spr, exit_)
            highs = np.append(self.highs[a:b] + spr, exit_)
            sign = 1.0 if side == "buy" else -1.0
            best = highs.max() if side == "buy" else lows.min()
            worst = lows.min() if side == "buy" else highs.max()
            mfe[k] = max(0.0, sign * (best - entry) * lots * cs)
            mae[k] = min(0.0, sign * (worst - entry) * lots * cs)
        df["mae"], df["mfe"] = mae, mfe
        return df

    def curves(self, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Balance, equity and used margin at each bar's close from bar ``first`` on (after ``finish``)."""
        n = len(self.opens)
        changes = np.zeros(n + 1)
        for bar, amount in self._balance_events:
            changes[bar] += amount
        balance = self.config.deposit + np.cumsum(changes[:n])
        floating = np.zeros(n)
        margin_diff = np.zeros(n + 1)
        cs, lev = self.config.contract_size, self.config.leverage
        bid = self.closes
        ask = self.closes + self.spread
        for start, end, side, lots, price in self._segments:
            if side > 0:
                floating[start:end] += (bid[start:end] - price) * lots * cs
            else:
                floating[start:end] += (price - ask[start:end]) * lots * cs
            margin_diff[start] += lots * cs * price / lev
            margin_diff[end] -= lots * cs * price / lev
        margin = np.cumsum(margin_diff[:n])
        equity = balance + floating
        return balance[first:], equity[first:], margin[first:]
