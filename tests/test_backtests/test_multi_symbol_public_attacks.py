"""Attacks through the public ``Backtest`` surface: swaps of several symbols held over a weekend on a UTC+2
server (hand-computed), and the lean optimisation pass against ``run()`` in ohlc1m with swaps, commission,
hedging and a stop-out, and on a ``Backtest`` reused after a pass the EA broke."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from test_backtests.pass_eas import HEDGING, HedgedBrackets

from backtests import AccountConfig, Backtest
from datafeeds import make_frame, resample, synthetic_candles
from datafeeds.candles import CandleMeta
from datafeeds.clock import BrokerClock
from datafeeds.symbols import BUILTIN
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor
from strategies.errors import EARuntimeError

CLOCK = BrokerClock.parse("+2/us")
KEYS = ["final_balance", "total_net_profit", "equity_drawdown_maximal", "sharpe_ratio", "total_trades"]


class HoldOverWeekend(ExpertAdvisor):
    """A EURUSD long and a GBPUSD short from Friday 10:00 to Tuesday 10:00 of the server clock."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        now = (self.bars.time[-1] + pd.Timedelta(hours=1)).tz_convert("UTC") + pd.Timedelta(hours=2)
        if now == pd.Timestamp("2024-01-05 10:00", tz="UTC"):
            self.buy(0.1, symbol="EURUSD")
            self.sell(0.1, symbol="GBPUSD")
        if now == pd.Timestamp("2024-01-09 10:00", tz="UTC"):
            self.close(symbol="EURUSD")
            self.close(symbol="GBPUSD")


def test_swaps_of_several_symbols_over_a_weekend_charge_friday_and_monday_nights_of_the_server():
    frames = {
        s: synthetic_candles(s, "H1", 24 * 14, seed=i + 1, start="2024-01-01", clock=CLOCK)
        for i, s in enumerate(HoldOverWeekend.symbols)
    }
    specs = {
        "EURUSD": replace(BUILTIN["EURUSD"], swap_long=-7.0, swap_short=2.0),
        "GBPUSD": replace(BUILTIN["GBPUSD"], swap_long=-3.0, swap_short=-4.5),
    }
    trades = Backtest(frames, HoldOverWeekend, specs=specs, forward=None).run().trades.set_index("symbol")
    # Friday and Monday nights (the triple night is Wednesday's; Saturday and Sunday none): 2 nights.
    # EURUSD long: -7 points x 0.00001 x 100,000 x 0.1 lot x 2 = -1.40 USD
    # GBPUSD short: -4.5 points x 0.00001 x 100,000 x 0.1 lot x 2 = -0.90 USD
    assert trades.loc["EURUSD", "swap"] == -1.40
    assert trades.loc["GBPUSD", "swap"] == -0.90
    assert (trades["entry_time"] == pd.Timestamp("2024-01-05 08:00", tz="UTC")).all()  # 10:00 server


@pytest.fixture(scope="module")
def minutes():
    m1 = synthetic_candles("EURUSD", "M1", bars=3 * 1440, seed=5, start="2024-01-01")
    return resample(m1, "H1"), m1


@pytest.mark.parametrize(
    ("account", "params"),
    [
        (AccountConfig(hedging=True, swap_long=-5.0, swap_short=2.5, commission=3.5), {"every": 3}),
        (AccountConfig(hedging=True, deposit=300.0), {"size": 20.0}),  # stopped out
    ],
    ids=["swaps-commission", "stop-out"],
)
def test_an_ohlc1m_lean_pass_gives_the_runs_figures_with_swaps_commission_and_a_stop_out(
    minutes, account, params
):
    h1, m1 = minutes
    bt = Backtest(h1, HedgedBrackets, model="ohlc1m", m1=m1, forward=None, account=account)
    lean = bt.run_pass(params, KEYS)
    full = bt.run(**params)
    assert full.stats["total_trades"] > 3
    for key in lean.stats:
        assert lean.stats[key] == full.stats[key] or lean.stats[key] is full.stats[key], key


def test_a_pass_the_ea_broke_leaves_nothing_for_the_next_pass_on_the_same_backtest(minutes):
    h1, _ = minutes

    class Boom(HedgedBrackets):
        boom = 0

        def on_bar(self):
            super().on_bar()
            if self.boom and len(self.bars) > 40:
                raise ValueError("boom")

    fresh = Backtest(h1, Boom, forward=None, account=HEDGING).run_pass({"every": 4}, KEYS).stats
    reused = Backtest(h1, Boom, forward=None, account=HEDGING)
    with pytest.raises(EARuntimeError, match="boom"):
        reused.run_pass({"every": 4, "boom": 1}, KEYS)
    assert reused.run_pass({"every": 4}, KEYS).stats == fresh
    assert fresh["total_trades"] > 3


def test_a_short_run_with_a_large_gain_has_no_cagr_and_no_numpy_overflow_warning(recwarn):
    """A 75% gain over four hours compounds to far beyond a float a year: the CAGR is undefined (None),
    with no RuntimeWarning from deep inside NumPy on the user's screen."""

    class BuyOnce(ExpertAdvisor):
        def on_bar(self):
            if not self.deals_done:
                self.deals_done = bool(self.buy(1.0))

        def on_init(self):
            self.deals_done = False

    index = pd.date_range("2024-01-02", periods=5, freq="h", tz="UTC")
    prices = [1.1000, 1.1000, 1.1050, 1.1100, 1.1150]
    frame = {"open": prices, "high": prices, "low": prices, "close": prices, "spread": [0] * 5}
    bars = make_frame(frame, index, CandleMeta("EURUSD", Timeframe.H1, 5))
    result = Backtest(bars, BuyOnce, forward=None, account=AccountConfig(spread=0, deposit=2_000.0)).run()
    assert result.stats["total_net_profit"] > 0
    assert result.stats["cagr_pct"] is None
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
