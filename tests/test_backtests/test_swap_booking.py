"""Swap booked as MetaTrader 5 books it: each rollover's swap stays on the position (``POSITION_SWAP``, part
of its floating result, so in the equity, the margin level and the stop-out) and reaches the balance only
with the deal that closes the position (``DEAL_SWAP`` of the exit deal; a partial close books its share).
Every figure below is worked by hand in its docstring: EURUSD, 1 lot = 100,000 euros, a point 0.00001,
so a point of one lot is one dollar; spread 0; the rates are points per lot per night."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

MONDAY = pd.Timestamp("2024-01-08", tz="UTC")
HOURS = pd.date_range(MONDAY, periods=5 * 24, freq="h")
FRIDAY = 4  # a triple-swap day after every rollover below: each night counts once


def _at(day: int, hour: int) -> pd.Timestamp:
    return MONDAY + pd.Timedelta(days=day, hours=hour)


def _frame(moves: dict[pd.Timestamp, float], start: float = 1.10000) -> pd.DataFrame:
    """H1 EURUSD bars at ``start``; the bar opened at each time of ``moves`` closes at its price, which
    every later bar opens and stays at."""
    price, opens, closes = start, [], []
    for t in HOURS:
        opens.append(price)
        price = moves.get(t, price)
        closes.append(price)
    o, c = np.array(opens), np.array(closes)
    cols = {
        "open": o,
        "high": np.maximum(o, c),
        "low": np.minimum(o, c),
        "close": c,
        "tick_volume": np.ones(len(HOURS), dtype=np.int64),
    }
    return make_frame(cols, HOURS, CandleMeta("EURUSD", Timeframe.H1, 5, UTC, "test"))


class _Plan(ExpertAdvisor):
    """Runs ``steps`` (time -> what to do) and records the account the EA sees at each ``look`` time."""

    steps: ClassVar[dict] = {}
    looks: ClassVar[tuple] = ()
    seen: ClassVar[dict] = {}

    def on_bar(self):
        now = self.time_current
        if now in self.looks:
            type(self).seen[now] = self.account
        step = self.steps.get(now)
        if step is not None:
            step(self)


def _run(steps: dict, looks: tuple = (), moves: dict | None = None, **account):
    plan = type("Plan", (_Plan,), {"steps": steps, "looks": looks, "seen": {}})
    config = AccountConfig(**{"deposit": 10_000.0, "spread": 0, "triple_swap_weekday": FRIDAY, **account})
    result = Backtest(_frame(moves or {}), plan, account=config, forward=None).run()
    return result, plan.seen


def _balances(result) -> list[float]:
    return result.deals["balance"].round(2).tolist()


def test_a_position_held_three_nights_and_closed_at_a_loss_books_its_swap_with_the_closing_deal():
    """1 lot bought on Monday at 1.10000 at -10 points a night, sold on Thursday 12:00 at 1.09900: the
    nights of Tuesday, Wednesday and Thursday 00:00 accrue -30.00 on the position, so on Wednesday at noon
    the EA sees a balance of 10,000.00 and an equity of 10,000 - 20 = 9,980.00 (the price unchanged).
    The closing deal books profit -100.00 and swap -30.00: balance 9,870.00, the balance's only fall
    (maximal balance drawdown 130.00; the equity fell the same 130.00, by steps)."""
    steps = {_at(0, 1): lambda ea: ea.buy(1.0), _at(3, 12): lambda ea: ea.close()}
    result, seen = _run(steps, looks=(_at(2, 12),), moves={_at(3, 11): 1.09900}, swap_long=-10.0)
    (wednesday,) = seen.values()
    assert (wednesday.balance, wednesday.equity) == (10_000.0, 9_980.0)
    trade = result.trades.iloc[0]
    assert (trade.profit, trade.swap, trade.net_profit) == (-100.0, -30.0, -130.0)
    assert _balances(result) == [10_000.0, 9_870.0]
    assert result.deals["swap"].tolist() == [0.0, -30.0]
    curve = result.equity
    assert curve.at[_at(2, 12), "balance"] == 10_000.0  # no deal yet: the balance has not moved
    assert curve.at[_at(2, 12), "equity"] == pytest.approx(9_980.0, abs=1e-9)
    assert result.stats["balance_drawdown_maximal"] == pytest.approx(130.0, abs=0.005)
    assert result.stats["equity_drawdown_maximal"] == pytest.approx(130.0, abs=0.005)
    assert result.stats["final_balance"] == pytest.approx(9_870.0, abs=0.005)


def test_a_partial_close_books_the_share_of_the_swap_its_lots_take():
    """2 lots bought on Monday at 1.10000 at -10 points a lot a night; the price is 1.10100 from Monday
    noon. Wednesday 12:00, after two nights (-40.00 accrued), 0.5 lots are sold: a quarter of the
    position, so the deal books profit +50.00 and swap -10.00 (balance 10,040.00) and -30.00 stays on
    the 1.5 lots left. Thursday's night adds 1.5 x -10 = -15.00: -45.00, which the closing deal of Thursday
    12:00 books with its profit +150.00 (balance 10,145.00). The EA sees 10,040.00 and an equity of
    10,040 + 150 - 45 = 10,145.00 on Thursday at 06:00."""

    def partial(ea):
        (pos,) = ea.positions()
        ea.close(pos.ticket, lots=0.5)

    steps = {_at(0, 1): lambda ea: ea.buy(2.0), _at(2, 12): partial, _at(3, 12): lambda ea: ea.close()}
    moves = {_at(0, 12): 1.10100}
    result, seen = _run(steps, looks=(_at(3, 6),), moves=moves, swap_long=-10.0)
    (thursday,) = seen.values()
    assert (thursday.balance, thursday.equity) == (10_040.0, pytest.approx(10_145.0, abs=1e-9))
    trades = result.trades
    assert trades["lots"].tolist() == [0.5, 1.5]
    assert trades["profit"].tolist() == [50.0, 150.0]
    assert trades["swap"].tolist() == [-10.0, -45.0]
    assert result.deals["swap"].tolist() == [0.0, -10.0, -45.0]
    assert _balances(result) == [10_000.0, 10_040.0, 10_145.0]


def test_a_hedged_pair_books_each_legs_swap_with_its_own_closing_deal():
    """Hedging: 1 lot bought and 1 lot sold on Monday at 1.10000 (flat), longs -10 and shorts +4 points a
    night. The short is bought back on Wednesday at noon after two nights: its deal books +8.00 (balance
    10,008.00) while the long's -20.00 stays on it; Thursday's night makes it -30.00, booked by its closing
    deal on Thursday at noon: balance 9,978.00. MetaTrader's balance rises to 10,008.00 and falls to
    9,978.00, a maximal balance drawdown of 30.00; the equity falls by the nights' -6, -6 and -10 from
    10,000.00 to 9,978.00 (22.00). With each night on the balance at its rollover, the balance drawdown
    read 22.00: 8 dollars in the EA's favour."""
    tickets: dict = {}

    def both(ea):
        tickets["long"], tickets["short"] = ea.buy(1.0), ea.sell(1.0)

    steps = {
        _at(0, 1): both,
        _at(2, 12): lambda ea: ea.close(tickets["short"]),
        _at(3, 12): lambda ea: ea.close(tickets["long"]),
    }
    looks = (_at(2, 6), _at(2, 18))
    result, seen = _run(steps, looks, hedging=True, swap_long=-10.0, swap_short=4.0)
    before, after = (seen[t] for t in looks)
    assert (before.balance, before.equity) == (10_000.0, pytest.approx(9_988.0, abs=1e-9))
    assert (after.balance, after.equity) == (10_008.0, pytest.approx(9_988.0, abs=1e-9))
    trades = result.trades.set_index("type")
    assert (trades.at["sell", "swap"], trades.at["buy", "swap"]) == (8.0, -30.0)
    assert _balances(result) == [10_000.0, 10_000.0, 10_008.0, 9_978.0]
    assert result.stats["balance_drawdown_maximal"] == pytest.approx(30.0, abs=0.005)
    assert result.stats["equity_drawdown_maximal"] == pytest.approx(22.0, abs=0.005)


def test_an_accrued_swap_that_tips_the_margin_level_stops_the_position_out_at_the_rollover():
    """1,000 USD at 1:500, 1 lot bought on Monday at 1.10000 (margin 100,000 x 1.1 / 500 = 220.00), the
    price flat, -300 points a night. The equity holds the accrued swap: 700.00, 400.00, then 100.00 at
    Thursday's rollover, a margin level of 100 / 220 = 45 % below the 50 % stop-out: the position is
    closed at Thursday's open, at 1.10000, and its deal books profit 0 and swap -900.00 (balance 100.00).
    The same stop-out, at the same time and price, as when each night went to the balance at its rollover;
    only the balance before it differs (1,000.00 on Wednesday, not 400.00)."""
    steps = {_at(0, 1): lambda ea: ea.buy(1.0)}
    result, seen = _run(
        steps, looks=(_at(2, 12),), deposit=1_000.0, leverage=500.0, stop_out_level=50.0, swap_long=-300.0
    )
    (wednesday,) = seen.values()
    assert (wednesday.balance, wednesday.equity) == (1_000.0, 400.0)
    assert wednesday.margin == pytest.approx(220.0, abs=1e-9)
    trade = result.trades.iloc[0]
    assert (trade.exit_reason, trade.exit_time, trade.exit_price) == ("stop out", _at(3, 0), 1.1)
    assert (trade.profit, trade.swap) == (0.0, -900.0)
    assert _balances(result) == [1_000.0, 100.0]
    assert result.equity.at[_at(2, 23), "balance"] == 1_000.0
    assert result.equity.at[_at(2, 23), "equity"] == pytest.approx(400.0, abs=1e-9)
