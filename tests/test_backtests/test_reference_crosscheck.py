"""``ohlc1m`` and ``ticks`` against an independent reference broker (``reference_broker``: MetaTrader's
documented rules, whole points, sharing no code with the broker), trade for trade, with market orders,
limits, stops, SL/TP, expirations and closes, on three seeds of synthetic M1 data; and the equity drawdown
of every price walked."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from test_backtests.reference_broker import ReferenceBroker, minute_path
from test_backtests.scripted_requests import SCALE, Plan, points, script, scripted_ea

from backtests import AccountConfig, Backtest
from datafeeds import bars_from_ticks, resample, synthetic_candles, synthetic_ticks

DEPOSIT, COMMISSION = 1_000_000.0, 3.0
DAY_NS = 86_400_000_000_000


PLAN = Plan(
    close_chance=0.15,
    close_any=False,
    most=4,
    lot_unit=0.1,
    lot_steps=5,
    gaps_low=(1, 2, 2),
    gaps_high=(40, 40, 50),
    stop_chance=0.8,
    today_below=0.6,
    expiry_minutes=240,
)  # up to three requests a bar, levels a few points apart
Scripted = scripted_ea(PLAN, strict=True)


def _apply(ref: ReferenceBroker, seed: int, t: int, bid: int, ask: int, now: int) -> None:
    tickets = sorted(p.ticket for p in ref.positions)
    for req in script(PLAN, seed, t, bid, ask, now, tickets):
        if req[0] == "close":
            ref.close(req[1], bid, ask)
        elif req[0] in ("buy", "sell"):
            _, lots, sl, tp = req
            ref.market(1 if req[0] == "buy" else -1, lots, sl, tp, bid, ask)
        else:
            kind, lots, price, sl, tp, exp = req
            expiration = (now // DAY_NS + 1) * DAY_NS if exp == "today" else exp  # UTC server clock
            ref.pending(kind, lots, price, sl, tp, expiration)


def reference_ohlc1m(h1: pd.DataFrame, m1: pd.DataFrame, seed: int) -> ReferenceBroker:
    ref = ReferenceBroker(DEPOSIT, COMMISSION)
    o, h, lo, c = points(m1, "open", "high", "low", "close")
    spread = m1["spread"].to_numpy().astype(np.int64)
    minute_ns, bar_ns = m1.index.as_unit("ns").asi8, h1.index.as_unit("ns").asi8
    starts = np.searchsorted(minute_ns, np.append(bar_ns, np.iinfo(np.int64).max))
    rose = False  # no minute before the first: a doji there counts as rising
    for t in range(len(h1)):
        first = starts[t]
        ref.expire(int(minute_ns[first]))  # the bar's first tick is its first minute's open, at its time
        bid, ask = int(o[first]), int(o[first] + spread[first])
        ref.jump(bid, ask, record=False)
        if t >= 1:  # forward=None: the first decision is at bar 1
            _apply(ref, seed, t, bid, ask, int(minute_ns[first]))
        for r in range(first, starts[t + 1]):
            ref.expire(int(minute_ns[r]))
            path, rose = minute_path(int(o[r]), int(h[r]), int(lo[r]), int(c[r]), rose)
            ref.jump(path[0], path[0] + int(spread[r]))
            for a, b in pairwise(path):
                if a != b:
                    ref.move(a, b, int(spread[r]))
    ref.now = int(bar_ns[-1])
    ref.finish(int(c[-1]), int(c[-1] + spread[-1]))
    return ref


def reference_ticks(h1: pd.DataFrame, ticks: pd.DataFrame, seed: int) -> ReferenceBroker:
    ref = ReferenceBroker(DEPOSIT, COMMISSION)
    bid, ask = points(ticks, "bid", "ask")
    tick_ns, bar_ns = ticks.index.as_unit("ns").asi8, h1.index.as_unit("ns").asi8
    starts = np.searchsorted(tick_ns, np.append(bar_ns, np.iinfo(np.int64).max))
    for t in range(len(h1)):
        first = starts[t]
        ref.expire(int(tick_ns[first]))
        ref.jump(int(bid[first]), int(ask[first]), record=False)
        if t >= 1:
            _apply(ref, seed, t, int(bid[first]), int(ask[first]), int(tick_ns[first]))
        ref.mark(int(bid[first]), int(ask[first]))
        for r in range(first + 1, starts[t + 1]):
            ref.expire(int(tick_ns[r]))
            ref.jump(int(bid[r]), int(ask[r]))
    ref.now = int(bar_ns[-1])
    ref.finish(int(bid[-1]), int(ask[-1]))
    return ref


def _compare(result, ref: ReferenceBroker) -> None:
    ours = result.trades.sort_values("ticket").reset_index(drop=True)
    theirs = sorted(ref.trades, key=lambda tr: tr.ticket)
    assert len(ours) == len(theirs) > 20
    for row, tr in zip(ours.itertuples(), theirs, strict=True):
        want = (tr.ticket, tr.type, tr.lots, pd.Timestamp(tr.entry_ns, tz="UTC"), tr.entry_price / SCALE,
                pd.Timestamp(tr.exit_ns, tz="UTC"), tr.exit_price / SCALE, tr.reason)  # fmt: skip
        got = (row.ticket, row.type, row.lots, row.entry_time, row.entry_price, row.exit_time, row.exit_price,
               row.exit_reason)  # fmt: skip
        assert got == want
        assert row.profit == pytest.approx(tr.profit, abs=1e-6)
    assert {"sl", "tp", "signal"} <= set(ours["exit_reason"])
    assert result.stats["final_balance"] == pytest.approx(ref.balance, abs=1e-6)
    assert result.stats["equity_drawdown_maximal"] == pytest.approx(ref.max_drawdown(), abs=1e-6)


ACCOUNT = AccountConfig(deposit=DEPOSIT, commission=COMMISSION, hedging=True, stop_out_level=0.0)


@pytest.mark.parametrize("seed", [11, 22, 33])
def test_ohlc1m_equals_the_reference_trade_for_trade(seed):
    m1 = synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=seed, start="2024-03-04")
    h1 = resample(m1, "H1")
    result = Backtest(h1, Scripted, model="ohlc1m", m1=m1, forward=None, account=ACCOUNT).run(seed=seed)
    orders = result.orders
    assert {"expired", "filled"} <= set(orders["state"]) and orders["type"].str.contains("limit|stop").any()
    _compare(result, reference_ohlc1m(h1, m1, seed))


@pytest.mark.parametrize("seed", [11, 22, 33])
def test_ticks_equal_the_reference_trade_for_trade(seed):
    m1 = synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=seed, start="2024-03-04")
    ticks = synthetic_ticks(m1, seed=seed, ticks_per_minute=6)
    h1 = resample(bars_from_ticks(ticks, "M1"), "H1")
    result = Backtest(h1, Scripted, model="ticks", ticks=ticks, forward=None, account=ACCOUNT).run(seed=seed)
    assert {"expired", "filled"} <= set(result.orders["state"])
    _compare(result, reference_ticks(h1, ticks, seed))


def _late(m1: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``m1`` with the first 1 to 45 minutes of about half its hours left out: bars whose first minute (or
    tick) comes late, a few past an order's expiration or a "today" order's midnight."""
    rng = np.random.default_rng(seed)
    hours = m1.index.floor("h")
    late_hours = hours.unique()[rng.random(len(hours.unique())) < 0.5]
    cut = pd.Series(rng.integers(1, 46, len(late_hours)), index=late_hours)
    return m1[~(hours.isin(late_hours) & (m1.index.minute < cut.reindex(hours).fillna(0).to_numpy()))]


@pytest.mark.parametrize("seed", [11, 22])
def test_ohlc1m_equals_the_reference_with_late_first_minutes(seed):
    """Bars opening late (their first minutes missing): the decision, its requests' expirations and "today"
    and every opening check at the first minute, the reference's rule; the bars made from the minutes there
    are, as a terminal makes them."""
    m1 = _late(synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=seed, start="2024-03-04"), seed)
    h1 = resample(m1, "H1")
    result = Backtest(h1, Scripted, model="ohlc1m", m1=m1, forward=None, account=ACCOUNT).run(seed=seed)
    assert {"expired", "filled"} <= set(result.orders["state"])
    _compare(result, reference_ohlc1m(h1, m1, seed))


@pytest.mark.parametrize("seed", [11, 22])
def test_ticks_equal_the_reference_with_late_first_ticks(seed):
    m1 = synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=seed, start="2024-03-04")
    ticks = synthetic_ticks(m1, seed=seed, ticks_per_minute=6)
    ticks = ticks[ticks.index.floor("min").isin(_late(m1, seed).index)]
    h1 = resample(bars_from_ticks(ticks, "M1"), "H1")
    result = Backtest(h1, Scripted, model="ticks", ticks=ticks, forward=None, account=ACCOUNT).run(seed=seed)
    assert {"expired", "filled"} <= set(result.orders["state"])
    _compare(result, reference_ticks(h1, ticks, seed))
