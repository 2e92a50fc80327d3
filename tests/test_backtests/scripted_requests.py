"""Seeded request scripts for the cross-checks against the independent simulators: the same requests reach
the broker (through an EA) and a simulator (through its own calls), drawn from one random stream per bar.

Prices are whole points (``SCALE`` per price unit). A ``Plan`` sets how busy and how wide the requests are;
each cross-check keeps its own plan (and so its own seeds' history).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from strategies import ExpertAdvisor

SCALE = 100_000
KINDS = ("buy", "sell", "buy_limit", "sell_limit", "buy_stop", "sell_stop")


@dataclass(frozen=True)
class Plan:
    """How a bar's requests are drawn (see ``script``)."""

    close_chance: float  # a close of an open position first
    close_any: bool  # a random open ticket (else the oldest)
    most: int  # up to most - 1 orders a bar
    lot_unit: float  # volumes are 1..lot_steps - 1 of this
    lot_steps: int
    gaps_low: tuple[int, int, int]  # pending distance, SL and TP distance in points: [low, high)
    gaps_high: tuple[int, int, int]
    stop_chance: float  # each of SL and TP is set with this chance
    today_below: float  # expiration: none below 0.4, "today" below this, else a time
    expiry_minutes: int  # a time 5 .. this many minutes ahead


def script(plan: Plan, seed: int, t: int, bid: int, ask: int, now: int, tickets: list[int]) -> list[tuple]:
    """The EA's requests at bar ``t`` (prices in points): ``("close", ticket)``, ``(kind, lots, sl, tp)``
    for market orders, ``(kind, lots, price, sl, tp, expiration)`` for pending ones (expiration None,
    "today" or UTC ns)."""
    rng = np.random.default_rng([seed, t])
    out: list[tuple] = []
    if tickets and rng.random() < plan.close_chance:
        out.append(("close", tickets[int(rng.integers(len(tickets)))] if plan.close_any else tickets[0]))
    for _ in range(int(rng.integers(0, plan.most))):
        kind = KINDS[int(rng.integers(len(KINDS)))]
        lots = round(plan.lot_unit * int(rng.integers(1, plan.lot_steps)), 2)
        gap, sl_gap, tp_gap = (int(v) for v in rng.integers(plan.gaps_low, plan.gaps_high))
        buy = kind.startswith("buy")
        price = {"buy": ask, "sell": bid, "buy_limit": ask - gap, "buy_stop": ask + gap,
                 "sell_limit": bid + gap, "sell_stop": bid - gap}[kind]  # fmt: skip
        ref = (bid if buy else ask) if kind in ("buy", "sell") else price  # SL/TP are from where it closes
        sl = ref - sl_gap if buy else ref + sl_gap
        tp = ref + tp_gap if buy else ref - tp_gap
        sl = sl if rng.random() < plan.stop_chance else None
        tp = tp if rng.random() < plan.stop_chance else None
        if kind in ("buy", "sell"):
            out.append((kind, lots, sl, tp))
            continue
        pick = rng.random()
        if pick < 0.4:
            expiration = None
        elif pick < plan.today_below:
            expiration = "today"
        else:
            expiration = now + int(rng.integers(5, plan.expiry_minutes)) * 60 * 10**9
        out.append((kind, lots, price, sl, tp, expiration))
    return out


def scripted_ea(plan: Plan, strict: bool) -> type[ExpertAdvisor]:
    """An EA sending ``script``'s requests (its ``seed`` parameter picks the stream); ``strict``: every
    close and order must be accepted."""

    class Scripted(ExpertAdvisor):
        seed = 0

        def on_bar(self) -> None:
            t = len(self.bars)
            bid, ask = round(self.bid * SCALE), round(self.ask * SCALE)
            tickets = sorted(p.ticket for p in self.positions())
            for req in script(plan, self.seed, t, bid, ask, self.time_current.value, tickets):
                px = lambda v: None if v is None else v / SCALE  # noqa: E731
                if req[0] == "close":
                    closed = self.close(req[1])
                    assert not strict or closed == 1, req
                elif req[0] in ("buy", "sell"):
                    _, lots, sl, tp = req
                    getattr(self, req[0])(lots, sl=px(sl), tp=px(tp))
                else:
                    kind, lots, price, sl, tp, exp = req
                    when = exp if exp in (None, "today") else pd.Timestamp(exp, tz="UTC")
                    getattr(self, kind)(lots, px(price), sl=px(sl), tp=px(tp), expiration=when)
                assert not strict or self.last_retcode in (10008, 10009), req

    return Scripted


def points(frame: pd.DataFrame, *columns: str) -> list[np.ndarray]:
    """Columns of prices as whole points."""
    return [np.rint(frame[c].to_numpy() * SCALE).astype(np.int64) for c in columns]
