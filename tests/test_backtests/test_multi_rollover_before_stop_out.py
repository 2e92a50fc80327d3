"""Several symbols: the rollover's swap is charged to every symbol's positions at the server's midnight,
before any symbol's checks of the new day's first bar, so a stop-out there (caused by one symbol's gap)
never closes another symbol's position with its night unpaid — whether that symbol opens at the same moment
after the first in the symbols' order, or has no bar of its own at all then (its positions were held over
midnight all the same; the rollover is the server's, not a price of the symbol).

Flat minutes at the minutes given only (UTC server clock), spread 0, leverage 500, stop-out at 50 %; both
symbols' long swap -10 points a lot a night: -10.00 USD a lot for Tuesday night.

At 23:00 Tuesday the EA buys 1 lot of GBPUSD at 1.30000 (margin 260.00) and 1 lot of EURUSD at 1.10000
(220.00) on a 600.00 deposit. At 00:00 Wednesday both are charged -10.00, and EURUSD opens at 1.09500:
-500.00, equity 600 - 500 - 20 = 80.00 against 480.00 of margin, 16.7 %: the stop-out closes EURUSD (the
most losing, -510.00 with its swap) at 1.09500, then, 80 / 260 = 30.8 %, GBPUSD at 1.30000 (profit 0.00,
swap -10.00). Final balance 600 - 500 - 10 - 10 = 80.00. The symbol checked first (EURUSD) stopped the
account out before GBPUSD's rollover was charged: GBPUSD's swap 0.00, balance 90.00, in the user's favour.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import backtests.merged as merged
import backtests.merged_ticks as merged_ticks
from backtests import AccountConfig, Backtest
from datafeeds.resample import resample
from datafeeds.symbols import BUILTIN
from datafeeds.ticks import TickMeta, make_ticks
from strategies.base import ExpertAdvisor
from tests.test_backtests.test_multi_minutes_openings import H, _at, _in_time_order, _minutes

HOURS = (21, 22, 23, 24, 25)  # Tuesday 21:00 to Wednesday 01:00


class _BuyBothAt23(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if self.time_current == _at(23 * H):
            self.buy(1.0, symbol="GBPUSD")
            self.buy(1.0, symbol="EURUSD")


def _rows(price_from_midnight: float, hours=HOURS) -> list:
    """A flat minute at each hour's start and end, at 1.1/1.3 before midnight, ``price_from_midnight`` on."""
    return [(h * H + m, price_from_midnight if h >= 24 else None) for h in hours for m in (0, 59)]


def _run(model: str, every: bool, gbp_hours, monkeypatch, deposit=600.0, eur_after=1.095):
    """The run by ``model`` (``every``: the stop-out never ruled out, every minute or tick walked), GBPUSD
    with bars at ``gbp_hours``, EURUSD at ``eur_after`` from midnight."""
    eur = [(m, 1.1 if p is None else p) for m, p in _rows(eur_after)]
    gbp = [(m, 1.3) for m, _ in _rows(1.3, gbp_hours)]
    m1 = {"EURUSD": _minutes("EURUSD", eur), "GBPUSD": _minutes("GBPUSD", gbp)}
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    specs = {s: replace(BUILTIN[s], swap_long=-10.0) for s in m1}
    account = AccountConfig(deposit=deposit, spread=0, leverage=500.0, stop_out_level=50.0)
    kw: dict = {"model": model}
    if model == "ohlc1m":
        kw["m1"] = m1
    elif model == "ticks":
        kw["ticks"] = {
            s: make_ticks(
                df.index.as_unit("ns").asi8,
                df["open"].to_numpy(),
                df["open"].to_numpy().copy(),
                TickMeta(s, 5, f"{s.lower()}_ticks.csv"),
            )
            for s, df in m1.items()
        }
    if every:
        walk = merged_ticks if model == "ticks" else merged
        monkeypatch.setattr(walk, "_stop_out_possible", lambda *args: True)
    result = Backtest(frames, _BuyBothAt23, account=account, forward=None, specs=specs, **kw).run()
    _in_time_order(result)
    return result


ROUTES = pytest.mark.parametrize(
    ("model", "every"),
    [("open", False), ("ohlc1m", False), ("ohlc1m", True), ("ticks", False), ("ticks", True)],
    ids=["open", "ohlc1m", "ohlc1m-every-minute", "ticks", "ticks-every-tick"],
)
GBP_BARS = pytest.mark.parametrize(
    "gbp_hours", [HOURS, (21, 22, 23, 25)], ids=["gbpusd-opens-too", "gbpusd-without-a-bar"]
)


@GBP_BARS
@ROUTES
def test_a_stop_out_at_the_first_bar_after_midnight_closes_every_position_with_its_night_paid(
    model, every, gbp_hours, monkeypatch
):
    result = _run(model, every, gbp_hours, monkeypatch)
    trades = result.trades.set_index("symbol")
    assert set(trades["exit_reason"]) == {"stop out"}
    assert list(trades["exit_time"]) == [_at(24 * H)] * 2
    assert (trades.loc["EURUSD", "exit_price"], trades.loc["EURUSD", "profit"]) == (1.095, -500.0)
    assert (trades.loc["GBPUSD", "exit_price"], trades.loc["GBPUSD", "profit"]) == (1.3, 0.0)
    np.testing.assert_array_equal(
        trades.loc[["EURUSD", "GBPUSD"], "swap"], [-10.0, -10.0]
    )  # GBPUSD's was 0.00
    assert result.stats["final_balance"] == pytest.approx(80.0)  # was 90.00


@GBP_BARS
@ROUTES
def test_a_position_held_over_midnight_pays_one_night_once(model, every, gbp_hours, monkeypatch):
    """A deposit of 10,000.00: no stop-out; both positions held to the end of the test (01:00 Wednesday),
    each charged -10.00 once (GBPUSD's no bar at 00:00 moves its charge to no later bar, nor charges it
    twice)."""
    result = _run(model, every, gbp_hours, monkeypatch, deposit=10_000.0, eur_after=1.1)
    trades = result.trades.set_index("symbol")
    np.testing.assert_array_equal(trades.loc[["EURUSD", "GBPUSD"], "swap"], [-10.0, -10.0])
    assert result.stats["final_balance"] == pytest.approx(10_000.0 - 20.0)
