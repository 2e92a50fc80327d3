"""The broker's result tables: trades (MAE/MFE), MetaTrader's orders and deals, balance/equity curves.

A mix-in of ``Broker``, kept apart so the fill logic and the bookkeeping of its records read separately.
Times are stored as bar indices while the run goes and turned into timestamps once, here.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from backtests.curves import worst_equity

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

ORDER_COLUMNS = (
    "ticket",
    "time_setup",
    "type",
    "lots",
    "price",
    "stoplimit",
    "sl",
    "tp",
    "expiration",
    "time_done",
    "fill_price",
    "state",
    "position",
    "magic",
    "comment",
)
log = logging.getLogger("backtests.broker")

DEAL_COLUMNS = (
    "deal",
    "time",
    "order",
    "position",
    "type",
    "entry",
    "lots",
    "price",
    "commission",
    "swap",
    "profit",
    "balance",
    "magic",
    "comment",
)


def json_safe(value: object) -> object:
    """NaN and infinities as text, so a rejected request with such a value still makes valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class Ledger:
    """Records and result tables of a ``Broker`` (which supplies the prices, state and configuration)."""

    # -- records, appended while the run goes ------------------------------------------------------------
    def _reject(self, action: str, side: int, lots: float, retcode: int, reason: str, **request) -> None:
        self.last_retcode = retcode
        self.rejected.append(
            {
                "time": str(self.time_now()),
                "bar": self.t,
                "action": action,
                "side": side,
                "lots": json_safe(lots),
                **{k: json_safe(v) for k, v in request.items()},
                "retcode": retcode,
                "reason": reason,
            }
        )
        log.info("request rejected at %s: %s (retcode %d)", self.time_now(), reason, retcode)
        return None

    def _order_record(
        self, ticket, kind, lots, price, sl, tp, state, position, magic, comment, **extra
    ) -> dict:
        record = {
            "ticket": ticket,
            "time_setup": self.t,
            "type": kind,
            "lots": lots,
            "price": price,
            "stoplimit": None,
            "sl": sl,
            "tp": tp,
            "expiration": None,
            "time_done": self.t if state == "filled" else None,
            "fill_price": price if state == "filled" else None,
            "state": state,
            "position": position,
            "magic": magic,
            "comment": comment,
            **extra,
            "setup_ns": self.stamp(),  # UTC ns inside the bar, None = the bar's time (see _times)
            "done_ns": self.stamp() if state == "filled" else None,
        }
        self.revision += 1
        self.order_log.append(record)
        return record

    def _deal(
        self,
        order,
        pos,  # broker.OpenPosition
        side: int,
        entry: str,
        lots,
        price,
        commission,
        swap,
        profit,
        comment: str | None = None,
    ) -> None:
        self.revision += 1
        self._deal_ns.append(self.stamp())
        self.deal_log.append(
            (
                len(self.deal_log) + 1,
                self.t,
                order,
                pos.ticket,
                "buy" if side > 0 else "sell",
                entry,
                lots,
                price,
                commission,
                swap,
                profit,
                self.balance,
                pos.magic,
                pos.comment if comment is None else comment,
            )
        )

    # -- result tables -------------------------------------------------------------------------------------

    def trades_frame(self) -> pd.DataFrame:
        """Closed trades in closing order, with MAE/MFE: the worst and best floating profit while open.

        Excursions use the high/low of the bars from entry up to (not including) the exit bar, longs at the
        bid and shorts at the ask, plus the exit price: in the exit bar the stop or take-profit is taken to
        come first (the pessimistic rule), so that bar's range beyond the exit level does not count.
        """
        df = pd.DataFrame(self.trades, columns=list(TRADE_COLUMNS))
        # The stamps from the tuples, not the frame: a column of ints and Nones would turn them into floats.
        df["entry_time"] = self._times(df["entry_bar"], [tr[3] for tr in self.trades])
        df["exit_time"] = self._times(df["exit_bar"], [tr[5] for tr in self.trades])
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

    def orders_frame(self) -> pd.DataFrame:
        """Every accepted order, as MetaTrader's report lists them: market orders (the EA's and the closing
        orders of SL, TP, stop-out and end of test) and pending orders with their final state."""
        df = pd.DataFrame(self.order_log, columns=list(ORDER_COLUMNS))
        for col, ns in (("time_setup", "setup_ns"), ("time_done", "done_ns")):
            bars = np.array([-1 if b is None else b for b in df[col]], dtype=np.int64)
            stamps = [r.get(ns) for r in self.order_log]
            df[col] = self._times(np.maximum(bars, 0), stamps).where(bars >= 0)
        for col in ("ticket", "position"):
            df[col] = df[col].astype("Int64")
        return df

    def deals_frame(self) -> pd.DataFrame:
        """Every deal in order: entries ("in"), exits ("out"; "out_by" for close-by), balance after each."""
        df = pd.DataFrame(self.deal_log, columns=list(DEAL_COLUMNS))
        df["time"] = self._times(df["time"], self._deal_ns)
        for col in ("order", "position"):
            df[col] = df[col].astype("Int64")
        return df

    def _times(self, bars, stamps) -> pd.DatetimeIndex:
        """Record times: the UTC ns of the minute or tick that made them where one was recorded, else the
        opening time of their bar (a decision at the open, or the open-prices model)."""
        at_bar = self.time[np.asarray(bars, dtype=np.int64)]
        ns = np.array([-1 if v is None else v for v in stamps], dtype=np.int64)
        inside = ns >= 0
        if not inside.any():
            return at_bar
        out = at_bar.as_unit("ns").asi8.copy()
        out[inside] = ns[inside]
        return pd.DatetimeIndex(pd.to_datetime(out, utc=True), name=at_bar.name)

    def worst_curves(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        """Equity at each bar's worst prices and the margin held then, from bar ``first`` on
        (``backtests.curves.worst_equity`` says how)."""
        balance, equity, _ = self.curves(0)
        trades = pd.DataFrame(self.trades, columns=list(TRADE_COLUMNS))
        bars = (self.opens, self.highs, self.lows, self.spread)
        worst, margin = worst_equity(self._segments, trades, bars, balance, equity, self.config)
        return worst[first:], margin[first:]
