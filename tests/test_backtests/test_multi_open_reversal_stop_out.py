"""Open prices with several symbols, netting: a pending order reverses one symbol's position inside the same
bar in which another symbol's fall stops the account out, worked by hand.

Leverage 100, spread 0, stop-out 50 %, 2,400 USD, 5-digit symbols without specifications (1 lot: 1 USD a
point). At 01:00 the EA buys 1 lot of EURUSD at 1.09600 (margin 1,096) and 1 lot of GBPUSD at 1.30000
(margin 1,300: free margin 2,400 - 1,096 = 1,304 holds it) and places a sell limit of 2 lots of EURUSD at
1.10100. EURUSD's 01:00 bar rises to 1.10200 and closes 1.10150; GBPUSD's falls to 1.28000 and closes
1.29000.

EURUSD works its range first: the limit reverses the long (closed at 1.10100, +500: balance 2,900) into a
short of 1 lot at 1.10100 (margin 1,101 + 1,300 = 2,401, equity 2,900 at the fill). Its deals came at one
price, so it then stands at the worse of its fill (short at 0) and its close (short at -50): the close.
GBPUSD's range: the level reaches 50 % (1,200.50 of equity) where 2,900 - 50 + (bid - 1.30000) x 100,000 =
1,200.50, bid 1.283505, the first whole point at or beyond it 1.28350; the most losing position there is the
GBPUSD long (-1,650 against the short's -50), stopped out at 1.28350. The short stays to the end of the
test, at EURUSD's last close 1.10150: -50. Final balance 2,400 + 500 - 1,650 - 50 = 1,200.
"""

from __future__ import annotations

import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor
from tests.flat_candles import T0, flat_frame


class _LongsAndReversal(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(1.0, symbol="EURUSD") is not None
            assert self.buy(1.0, symbol="GBPUSD") is not None
            assert self.sell_limit(2.0, 1.101, symbol="EURUSD") is not None


def test_open_prices_a_reversal_and_another_symbols_stop_out_in_one_bar():
    h1 = Timeframe.H1
    frames = {
        "EURUSD": flat_frame("EURUSD", 1.1015, {0: (1.096,) * 4, 1: (1.096, 1.102, 1.096, 1.1015)}, 4, h1),
        "GBPUSD": flat_frame("GBPUSD", 1.29, {0: (1.3,) * 4, 1: (1.3, 1.3, 1.28, 1.29)}, 4, h1),
    }
    account = AccountConfig(deposit=2_400.0, spread=0, leverage=100.0, stop_out_level=50.0, hedging=False)
    result = Backtest(frames, _LongsAndReversal, account=account, forward=None).run()
    got = result.trades[["symbol", "type", "entry_price", "exit_price", "exit_reason", "profit"]]
    assert got.to_dict("records") == [
        {"symbol": "EURUSD", "type": "buy", "entry_price": 1.096, "exit_price": 1.101,
         "exit_reason": "sell_limit", "profit": 500.0},
        {"symbol": "GBPUSD", "type": "buy", "entry_price": 1.3, "exit_price": pytest.approx(1.2835),
         "exit_reason": "stop out", "profit": -1650.0},
        {"symbol": "EURUSD", "type": "sell", "entry_price": 1.101, "exit_price": 1.1015,
         "exit_reason": "end of test", "profit": -50.0},
    ]  # fmt: skip
    assert result.trades["exit_time"].iloc[1] == T0 + pd.Timedelta(hours=1)
    assert result.stats["final_balance"] == pytest.approx(1_200.0) and not result.rejected
