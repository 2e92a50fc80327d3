"""A cheating EA that reads the bar now opening through every public route cannot profit from it.

Each route yields the close of the bar being decided (the future) or fails. With perfect foresight the EA
buys when that close is above the ask and sells when below, and closes at the next open: the control route
(reading the test's own copy of the history) shows how much that earns. Through the EA's API every route
must either raise or give nothing to trade on.
"""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest, EARuntimeError, LookAheadError
from datafeeds import CandleMeta, Timeframe, make_frame
from strategies import ExpertAdvisor


def candles(n=400, seed=5):
    rng = np.random.default_rng(seed)
    close = 1.1 + np.cumsum(rng.normal(0, 5e-4, n))
    open_ = np.concatenate(([1.1], close[:-1]))
    data = {
        "open": open_,
        "high": np.maximum(open_, close) + 1e-4,
        "low": np.minimum(open_, close) - 1e-4,
        "close": close,
        "tick_volume": np.full(n, 100),
        "spread": np.full(n, 2),
    }
    index = pd.date_range("2021-03-01", periods=n, freq="h", tz="UTC")
    # 8-digit prices (on the symbol's grid): every value distinct, so a value tells which bar it is.
    data.update({k: np.round(data[k], 8) for k in ("open", "high", "low", "close")})
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 8, source="test"))


DF = candles()


def _deepest(arr):
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _after(visible):
    """What lies just after ``visible`` in the deepest array its ``.base`` leads to (a stride-free peek)."""
    deep = _deepest(visible).reshape(-1)
    n = len(visible)
    for i in np.nonzero(deep == visible[-1])[0]:
        if n - 1 <= i < len(deep) - 1 and np.array_equal(deep[i + 1 - n : i + 1], visible):
            return deep[i + 1]
    return np.nan


ROUTES = {
    "control": lambda ea, t: DF.close.iloc[t],  # the test's own data: what foresight is worth
    "index": lambda ea, t: ea.bars.close[t],
    "base": lambda ea, t: _after(ea.bars.close),
    "window past the end": lambda ea, t: ea.bars.window(0, t + 1).close[-1],
    "window(0, 10**9)": lambda ea, t: ea.bars.window(0, 10**9).close[t],
    "frame": lambda ea, t: _after(ea.bars.frame()["close"].to_numpy()),
    "line index": lambda ea, t: ea.line[t],
    "line values base": lambda ea, t: _after(ea.line.values),
    "study bars kept": lambda ea, t: _after(ea.study.close[: t - ea.study.offset]),
    "study window grown": lambda ea, t: ea.study.window(ea.study.offset, t + 1).close[-1],
    "bars kept from the first bar": lambda ea, t: _after(ea.first_close),
    "indicator bars kept": lambda ea, t: ea.stolen.close[t],
}


class Cheat(ExpertAdvisor):
    route: str = "control"

    def on_init(self):
        self.line = self.indicator(self._steal, "close")
        self.first_close = None
        self.foresight = 0  # bars where the route gave the true close of the bar now opening

    def _steal(self, bars):
        self.stolen = bars  # the indicator function gets the whole history once
        return bars.close

    def on_study(self, bars):
        self.study = bars

    def on_bar(self):
        if self.first_close is None:
            self.first_close = self.bars.close
        t = len(self.bars)
        future = ROUTES[self.route](self, t)
        self.foresight += bool(future == DF.close.iloc[t])
        self.close()
        if np.isfinite(future) and future > self.ask:
            self.buy(1.0)
        elif np.isfinite(future) and future < self.bid:
            self.sell(1.0)


def _run(route):
    return Backtest(DF, Cheat, account=AccountConfig(deposit=10_000.0)).run(route=route)


def test_foresight_would_be_worth_a_lot():
    result = _run("control")
    assert result.ea_instance.foresight == len(result.equity) == 133
    assert result.stats["total_trades"] > 100 and result.stats["total_net_profit"] > 2_000


@pytest.mark.parametrize("route", [r for r in ROUTES if r != "control"])
def test_no_route_reads_the_bar_now_opening(route):
    try:
        result = _run(route)
    except EARuntimeError as exc:  # the route is refused, naming the EA, the hook and the bar
        assert exc.hook == "on_bar" and exc.ea == "Cheat" and exc.bar is not None
        assert isinstance(exc.original, IndexError | ValueError)
        return
    assert result.ea_instance.foresight == 0, f"{route} gave the EA the close of the bar now opening"


def test_an_indicator_reading_past_its_bars_through_base_is_caught():
    """Inside the causality probe a prefix's arrays end at the prefix: ``.base`` cannot hide a peek."""

    class Peek(ExpertAdvisor):
        def on_init(self):
            self.indicator(lambda b: np.append(_deepest(b.close)[1:], np.nan)[: len(b)], "next close")

    with pytest.raises(LookAheadError, match="next close"):
        Backtest(DF, Peek).run()


def test_on_study_cannot_reach_the_forward_period():
    class Learner(ExpertAdvisor):
        def on_init(self):
            self.seen = []

        def on_study(self, bars):
            routes = [
                (bars.close, "close"),
                (self.bars.close, "close"),
                (bars.frame()["close"].to_numpy(), "close"),
                (bars.frame().to_numpy(), "high"),
                (bars.high, "high"),
            ]
            # the newest bar whose value any route's deepest array holds
            reach = [np.isin(DF[col].to_numpy(), _deepest(arr)).nonzero()[0].max() + 1 for arr, col in routes]
            self.seen.append((len(self.bars), bars.offset + len(bars), max(reach)))

    result = Backtest(DF, Learner, walk_forward=(100, 120)).run()
    # each training sees bars before its own start only, through every route
    assert result.ea_instance.seen == [(100, 100, 100), (220, 220, 220), (340, 340, 340)]


def test_writes_through_base_change_neither_fills_nor_indicators():
    """Scribbling over what it was given fools only the EA: fills and indicators use the harness's copy."""

    class Scribbler(ExpertAdvisor):
        def on_init(self):
            self.line = self.indicator(lambda b: b.close, "close")
            self.log = []

        def on_bar(self):
            with pytest.raises(ValueError, match="read-only"):
                self.bars.close[-1] = 0.0
            _deepest(self.bars.open)[:] = 0.0  # through .base: allowed, but only its own copy
            self.log.append((self.line[-1], self.bid))

    ea = Backtest(DF, Scribbler, forward="1/4").run().ea_instance
    fs = len(DF) - len(ea.log)
    assert [v for v, _ in ea.log] == list(DF.close.iloc[fs - 1 : -1])
    assert [b for _, b in ea.log] == list(DF.open.iloc[fs:])
