"""Open prices with several symbols: a position filled inside a bar, valued at its symbol's open of that bar.

In open prices each symbol works its bar's range with the other symbols at their opens
(``backtests.multi_replay.open_prices``). A position another symbol's walk filled earlier in the same bar
is then valued at that symbol's open: a price from before the position existed, which its own bar may
never come back to after the fill. Its profit from the open to the fill is money the account never had,
and it pays for margin (a pending order of a second symbol accepted where MetaTrader's trade server
refuses it: "no money") and holds off stop-outs (the harness's random runs found a balance of -42.60 USD
with no stop-out this way).

Figures: a 2,000 USD account, leverage 100, spread 0. At 01:00 the EA places a sell limit of 1 lot of
EURUSD at 1.10100 (EURUSD opens at 1.09600) and a buy limit of 1 lot of GBPUSD at 1.29500 (GBPUSD opens at
1.30000). EURUSD's 01:00 bar rises 1.09600 -> 1.10200 -> 1.10150 (open = low), GBPUSD's falls 1.30000 ->
1.29400 -> 1.29450 (open = high): each limit is met inside the bar, and after its fill neither price comes
back to its open. Margins: 100,000 x 1.10100 / 100 = 1,101 USD and 100,000 x 1.29500 / 100 = 1,295 USD,
2,396 together. Whatever the order of the two fills, after either one the account's equity is at most
2,000 (the filled position's profit is 0 at its fill and below after it: EURUSD stays in 1.10100-1.10200,
GBPUSD in 1.29400-1.29500), so the free margin is at most 2,000 - 1,101 = 899 or 2,000 - 1,295 = 705:
neither leaves room for the other. Exactly one fills; the other is refused for lack of money, as the
``ohlc1m`` model of the same prices does (its minutes put the fills in time order). Valued at EURUSD's
open 1.09600, the short EURUSD position shows +500 USD, a free margin of 1,399, and both fill.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

T0 = pd.Timestamp("2024-01-02", tz="UTC")


class _TwoLimits(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.sell_limit(1.0, 1.101, symbol="EURUSD") is not None
            assert self.buy_limit(1.0, 1.295, symbol="GBPUSD") is not None


def _hours(symbol: str, base: float, special: dict[int, tuple[float, float, float, float]]) -> pd.DataFrame:
    n = 4
    cols = {c: np.full(n, base) for c in ("open", "high", "low", "close")}
    for i, (o, h, lo, c) in special.items():
        cols["open"][i], cols["high"][i], cols["low"][i], cols["close"][i] = o, h, lo, c
    cols["tick_volume"] = np.ones(n, dtype=np.int64)
    index = pd.date_range(T0, periods=n, freq="h")
    return make_frame(cols, index, CandleMeta(symbol, Timeframe.H1, 5, UTC, "test"))


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="open prices value a position filled earlier in the bar at its symbol's open while another "
    "symbol walks its range, so its profit from the open to the fill pays the second order's margin",
)
def test_open_prices_two_fills_in_one_bar_never_hold_more_margin_than_the_equity_could_carry():
    frames = {
        "EURUSD": _hours("EURUSD", 1.1015, {0: (1.096,) * 4, 1: (1.096, 1.102, 1.096, 1.1015)}),
        "GBPUSD": _hours("GBPUSD", 1.2945, {0: (1.3,) * 4, 1: (1.3, 1.3, 1.294, 1.2945)}),
    }
    account = AccountConfig(deposit=2_000.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = Backtest(frames, _TwoLimits, account=account, forward=None).run()
    limits = result.orders[result.orders["type"].isin(["sell_limit", "buy_limit"])]
    assert sorted(limits["state"]) == ["filled", "rejected"]
    assert len(result.trades) == 1
