"""The merged walks of several symbols' minutes and ticks pass over what cannot change anything: each bar's
moments and rows are found once a run (``backtests.bar_plan``), a symbol's next reachable minute or tick is
kept while its own book stays, and the stop-out is ruled out per bar. Each screened run equals the run that
walks every minute or tick of every symbol, fill for fill, stop-out for stop-out, to the cent."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import backtests.merged as merged_minutes
import backtests.merged_ticks as merged_ticks
from backtests import AccountConfig, Backtest
from backtests.bar_plan import BarPlan
from datafeeds import resample
from datafeeds.synthetic import synthetic_candles
from datafeeds.synthetic_ticks import synthetic_ticks
from datafeeds.ticks import bars_from_ticks
from strategies.base import ExpertAdvisor

SYMBOLS = ("EURUSD", "GBPUSD", "USDJPY")


class _Busy(ExpertAdvisor):
    """Each symbol on its own: 1 lot with SL/TP after an up or down bar, or a buy stop with an expiry and a
    sell limit while flat, on a deposit that the three together bring to the stop-out."""

    symbols = SYMBOLS

    def on_bar(self):
        for s in self.symbols:
            bars = self.data(s)
            if len(bars) < 2 or self.position_of(s) or self.orders(s):
                continue
            point = 0.001 if s.endswith("JPY") else 0.00001
            if len(bars) % 4 == 0:
                ask, bid = self.ask_of(s), self.bid_of(s)
                expires = bars.time[-1] + pd.Timedelta(minutes=100)
                self.buy_stop(1.0, ask + 40 * point, sl=ask - 150 * point, expiration=expires, symbol=s)
                self.sell_limit(1.0, bid + 60 * point, tp=bid - 100 * point, symbol=s)
                continue
            up = bars.close[-1] > bars.close[-2]
            (self.buy if up else self.sell)(1.0, symbol=s, sl_points=250, tp_points=150)


def _minutes(hours: int):
    m1 = {s: synthetic_candles(s, "M1", hours * 60, seed=i + 3) for i, s in enumerate(SYMBOLS)}
    m1["GBPUSD"] = m1["GBPUSD"].iloc[7:]  # its minutes begin later, inside the first bar
    m1["USDJPY"] = m1["USDJPY"].drop(m1["USDJPY"].index[60:75])  # a bar whose first minutes are missing
    return {s: resample(df, "H1") for s, df in m1.items()}, m1


def _ticks(hours: int):
    _, m1 = _minutes(hours)
    ticks = {s: synthetic_ticks(df, seed=i + 5, ticks_per_minute=4.0) for i, (s, df) in enumerate(m1.items())}
    return {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}, ticks


def _same(screened, full) -> None:
    assert (screened.trades["exit_reason"] == "stop out").sum() > 0
    assert {"sl", "tp"} <= set(screened.trades["exit_reason"])
    cols = ["symbol", "type", "lots", "entry_time", "entry_price", "exit_time", "exit_price", "exit_reason"]
    pd.testing.assert_frame_equal(screened.trades[[*cols, "profit"]], full.trades[[*cols, "profit"]])
    states = ["symbol", "type", "state", "time_setup", "time_done"]
    pd.testing.assert_frame_equal(screened.orders[states], full.orders[states])
    assert screened.rejected == full.rejected
    np.testing.assert_array_equal(screened.equity["equity"].to_numpy(), full.equity["equity"].to_numpy())


@pytest.mark.parametrize(("model", "module"), [("ohlc1m", merged_minutes), ("ticks", merged_ticks)])
def test_screened_merged_walks_equal_every_minute_and_tick_walked(model, module, monkeypatch):
    frames, fine = _minutes(150) if model == "ohlc1m" else _ticks(150)
    account = AccountConfig(deposit=3_000.0, leverage=100.0, stop_out_level=100.0)
    data = {"m1": fine} if model == "ohlc1m" else {"ticks": fine}
    screened = Backtest(frames, _Busy, model=model, account=account, forward=None, **data).run()
    monkeypatch.setattr(module, "_stop_out_possible", lambda *args: True)  # every row of every symbol
    full = Backtest(frames, _Busy, model=model, account=account, forward=None, **data).run()
    _same(screened, full)


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_bars_plan_is_what_each_bar_searched_for_itself(side):
    """The decision's moment and each symbol's row of it, found for every bar at once, against the search of
    each bar's own rows: the main symbol's first row of the bar (else the bar's opening), each symbol's first
    row at or after it (``left``) or its last at or before it (``right``, -1 before its first ever), and
    which symbols' first row of the bar comes after the decision."""
    frames, ticks = _ticks(30)
    bt = Backtest(frames, _Busy, model="ticks", ticks=ticks, forward=None)
    brokers = bt.multi.setup.brokers(AccountConfig())
    for name, path in bt.multi.paths.items():
        brokers[name].attach_path(path.for_run(None))
    desks = list(brokers.values())
    plan = BarPlan(desks, side)
    main = desks[0].price_path
    for t in range(len(main.starts) - 1):
        s, e = main.starts[t], main.starts[t + 1]
        now = int(main.row_ns[s]) if e > s else int(main.edges_ns[t])
        assert plan.decision[t] == now
        for d in desks:
            path = d.price_path
            a, b = int(path.starts[t]), int(path.starts[t + 1])
            own = b > a and not (d.market.closed is not None and d.market.closed[t])
            assert (d in plan.walking[t]) == own
            if not own:
                continue
            rows = path.row_ns[a:b]
            assert (d in plan.late[t]) == (d is not desks[0] and rows[0] > now)
            if side == "left":
                expected = a + int(np.searchsorted(rows, now, side="left"))
            elif d is desks[0]:
                expected = a
            else:
                last = a + int(np.searchsorted(rows, now, side="right")) - 1
                expected = last if last >= a else a - 1
            assert plan.at[d][t] == expected
