"""The replay loop: closed bars only, look-ahead detection, EA errors, periods, interruption."""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest, EARuntimeError, LookAheadError
from backtests.periods import PeriodError, resolve
from datafeeds import CandleMeta, Timeframe, make_frame
from strategies import EAError, ExpertAdvisor, SmaCrossEA
from strategies.indicators import sma


def candles(n=400, seed=1):
    rng = np.random.default_rng(seed)
    close = 1.1 + np.cumsum(rng.normal(0, 5e-4, n))
    open_ = np.concatenate(([1.1], close[:-1]))
    data = {
        "open": open_,
        "high": np.maximum(open_, close) + rng.uniform(0, 3e-4, n),
        "low": np.minimum(open_, close) - rng.uniform(0, 3e-4, n),
        "close": close,
        "tick_volume": rng.integers(100, 3000, n),
        "spread": np.full(n, 8),
    }
    index = pd.date_range("2021-03-01", periods=n, freq="h", tz="UTC")
    data.update({k: np.round(data[k], 5) for k in ("open", "high", "low", "close")})  # 5-digit prices
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5, source="test"))


class Spy(ExpertAdvisor):
    """Records what it sees at each decision."""

    def on_init(self):
        self.seen = []

    def on_bar(self):
        self.seen.append((len(self.bars), self.bars.close[-1], self.bid))


def test_ea_sees_closed_bars_only_and_decides_at_the_open():
    df = candles()
    bt = Backtest(df, Spy, forward="1/4")
    result = bt.run()
    ea = result.ea_instance
    fs = bt.periods.forward_start
    assert fs == 300 and len(ea.seen) == 100
    for k, (visible, last_close, bid) in enumerate(ea.seen):
        t = fs + k
        assert visible == t
        assert last_close == df.close.iloc[t - 1]
        assert bid == df.open.iloc[t]


def test_bars_view_is_read_only():
    class Writer(ExpertAdvisor):
        def on_bar(self):
            self.bars.close[-1] = 0.0

    with pytest.raises(
        EARuntimeError, match=r"Writer.on_bar raised at bar 300 \(2021-03-13 12:00:00\+00:00\)"
    ):
        Backtest(candles(), Writer, forward="1/4").run()


def test_an_indicator_that_peeks_ahead_is_refused():
    class Peeker(ExpertAdvisor):
        def on_init(self):
            self.next_close = self.indicator(lambda b: np.append(b.close[1:], np.nan), "next_close")

    with pytest.raises(LookAheadError, match="next_close"):
        Backtest(candles(), Peeker).run()


def test_causal_indicator_grows_with_the_bars():
    class Watch(ExpertAdvisor):
        def on_init(self):
            self.line = self.indicator(lambda b: sma(b.close, 5), "sma5")
            self.vals = []

        def on_bar(self):
            self.vals.append((len(self.line), self.line[-1]))

    df = candles()
    result = Backtest(df, Watch, forward="1/2").run()
    want = sma(df.close.to_numpy(), 5)
    for length, value in result.ea_instance.vals:
        assert value == want[length - 1]


def test_misspelt_parameter_gets_a_suggestion():
    with pytest.raises(EAError, match="did you mean 'fast'"):
        Backtest(candles(), SmaCrossEA).run(fsat=3)
    with pytest.raises(EAError, match="expects int"):
        Backtest(candles(), SmaCrossEA).run(fast="three")


def test_periods_by_fraction_date_and_walk_forward():
    idx = candles().index
    assert resolve(idx, "1/3").forward_start == 400 - 133
    assert resolve(idx, 0.5).forward_start == 200
    assert resolve(idx, "2021-03-10").forward_start == 9 * 24
    wf = resolve(idx, None, (100, 50))
    assert (wf.forward_start, wf.study_window, wf.retrain_every) == (100, 100, 50)
    assert wf.study_range(250) == (150, 250)
    with pytest.raises(PeriodError, match="too few bars"):
        resolve(idx[:10], "1/3", min_study=20)
    with pytest.raises(PeriodError, match="outside the data"):
        resolve(idx, "2030-01-01")
    with pytest.raises(PeriodError, match="strictly between"):
        resolve(idx, "3/2")


def test_walk_forward_retrains_on_the_latest_window():
    class Learner(ExpertAdvisor):
        def on_init(self):
            self.windows = []

        def on_study(self, bars):
            self.windows.append((bars.offset, bars.offset + len(bars), len(self.bars)))

    result = Backtest(candles(), Learner, walk_forward=(100, 120)).run()
    assert result.ea_instance.windows == [(0, 100, 100), (120, 220, 220), (240, 340, 340)]


def test_interrupt_keeps_a_partial_result():
    class Quits(ExpertAdvisor):
        def on_bar(self):
            if len(self.bars) == 320:
                raise KeyboardInterrupt
            if len(self.bars) == 310:
                self.buy(0.1)

    result = Backtest(candles(), Quits, forward="1/4").run()
    assert not result.complete
    assert len(result.equity) == 21 and result.trades.iloc[0].exit_reason == "end of test"


def test_same_seed_same_numbers():
    a = Backtest(candles(), SmaCrossEA, account=AccountConfig(commission=3.0)).run(fast=5, slow=12)
    b = Backtest(candles(), SmaCrossEA, account=AccountConfig(commission=3.0)).run(fast=5, slow=12)
    assert a.stats.equals(b.stats)
    assert a.stats["total_trades"] > 5


def test_forward_none_trades_from_the_second_bar():
    idx = candles().index
    assert resolve(idx, "none").forward_start == 1 and resolve(idx, None).forward_start == 1


def test_interrupt_during_training_still_scores_what_exists():
    class Slow(ExpertAdvisor):
        def on_study(self, bars):
            self.record_epoch({"round": 1, "epoch": 1, "loss": 1.0, "wall_s": 0.1, "device_s": None})
            raise KeyboardInterrupt

    result = Backtest(candles(), Slow).run()
    assert not result.complete and len(result.training) == 1 and result.stats["total_trades"] == 0


def test_on_tester_criterion_is_recorded():
    class Custom(SmaCrossEA):
        def on_tester(self, stats):
            return stats["total_trades"] * 2.0

    result = Backtest(candles(), Custom).run()
    assert result.custom_criterion == 2.0 * result.stats["total_trades"] > 0
