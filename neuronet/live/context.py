"""The trade context a live EA gets: a trading object (paper or terminal) plus indicators and the clock.

Trading calls go to the trading object unchanged; each one is journaled first as a ``request`` (the call
and its arguments) and then as a ``result`` (its answer and ``last_retcode``), so a journal shows what the
EA asked and what came of it, and a paper run can be rebuilt by making the same calls again.
Indicators are evaluated over the bars closed so far, proved causal on a shorter prefix as in the
backtest, and recomputed by ``LiveBars.refresh`` as bars close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from backtests.replay import causal_indicator, check_causal, evaluate_indicator
from neuronet.live.answers import JournalAnswers
from strategies.bars import BarFeed, Bars
from strategies.base import ExpertAdvisor
from strategies.trade import Account, Order, Position, net_volume

# The requests of ``strategies.trade.TradeContext`` that change something: journaled and replayable.
REQUESTS = ("order", "pending", "close", "close_by", "modify", "cancel", "modify_order")


class LiveBars:
    """The EA's growing view: a ``BarFeed`` of closed bars that ``append`` extends, and its indicators."""

    def __init__(self, history: pd.DataFrame, meta: Any):
        self.feed = BarFeed.from_frame(history, meta, len(history))

    def append(self, bar: pd.DataFrame) -> None:
        """Closed bars (a candle frame) after the last one; visible at the next ``show``."""
        index = bar.index.as_unit(self.feed.time.unit)
        self.feed.extend({c: bar[c].to_numpy(dtype=np.float64) for c in Bars.COLUMNS}, index)

    def show(self, ea: ExpertAdvisor) -> None:
        """Make every closed bar visible and bring the EA's indicators up to them, checking that the
        values already shown did not change (a look-ahead shows up here, live)."""
        feed = self.feed
        if feed.visible == len(feed):
            return
        lines = ea.declared_indicators()
        before = [np.array(line.values) for line, _ in lines]  # what the EA has seen so far
        feed.advance(len(feed))
        for (line, fn), old in zip(lines, before, strict=True):
            values = evaluate_indicator(fn, feed.snapshot(len(feed)), line.name)
            check_causal(line.name, old, values, feed.time)
            line.extend(values)


class LiveContext:
    """``strategies.trade.TradeContext`` for a live run (see the module docstring)."""

    def __init__(
        self,
        trading: Any,
        bars: LiveBars,
        record: Callable[..., dict],
        now: Callable[[], pd.Timestamp],
        bar: Callable[[], int],
    ):
        self.trading = trading
        self._bars = bars
        self._record = record
        self._now = now
        self._bar = bar
        self.answers = JournalAnswers()  # a bar cut short and decided again: its requests' answers

    @property
    def point(self) -> float:
        return self.trading.point

    @property
    def last_retcode(self) -> int:
        got = self.answers.retcode
        return self.trading.last_retcode if got is None else got

    def _request(self, name: str, *args: Any) -> Any:
        done, value, why = self.answers.take(name, list(args), None)
        if why is not None:
            self._record("warning", bar=self._bar(), message=why)
        if done:
            return value
        self._record("request", bar=self._bar(), time=self._now(), call=name, args=list(args))
        value = getattr(self.trading, name)(*args)
        self._record("result", bar=self._bar(), call=name, value=value, retcode=self.trading.last_retcode)
        return value

    def order(self, side, lots, sl, tp, magic, comment):
        return self._request("order", side, lots, sl, tp, magic, comment)

    def pending(self, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment):
        return self._request("pending", kind, lots, price, stoplimit, sl, tp, expiration, magic, comment)

    def close(self, ticket, magic, lots=None, reason="signal"):
        return self._request("close", ticket, magic, lots, reason)

    def close_by(self, ticket, opposite):
        return self._request("close_by", ticket, opposite)

    def modify(self, ticket, sl, tp):
        return self._request("modify", ticket, sl, tp)

    def cancel(self, ticket):
        return self._request("cancel", ticket)

    def modify_order(self, ticket, price, stoplimit, sl, tp, expiration="keep"):
        return self._request("modify_order", ticket, price, stoplimit, sl, tp, expiration)

    def orders(self) -> list[Order]:
        return self.trading.orders()

    def positions(self) -> list[Position]:
        return self.trading.positions()

    def net_lots(self) -> float:
        """The sum over the records of the trading (a paper broker or a terminal), as an EA would add them."""
        return net_volume(self.trading.positions())

    def account(self) -> Account:
        return self.trading.account()

    def price(self, side: int) -> float:
        return self.trading.price(side)

    def time_now(self) -> pd.Timestamp:
        return self._now()

    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str) -> np.ndarray:
        feed = self._bars.feed
        n = len(feed)
        probes = sorted({m for m in (n // 2, n - 1) if 2 <= m < n})
        return causal_indicator(fn, feed, name, probes)


def replay_args(call: str, args: list) -> list:
    """A journaled request's arguments as the trading object takes them (times back from ISO text)."""
    args = list(args)
    where = {"pending": 6, "modify_order": 5}.get(call)
    if where is not None and isinstance(args[where], str) and args[where] not in ("today", "keep"):
        args[where] = pd.Timestamp(args[where])
    return args
