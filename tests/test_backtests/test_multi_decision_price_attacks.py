"""1 minute OHLC with several symbols: the main symbol's price at the decision, when another symbol's minutes
before it reach a level.

The EA decides at the main symbol's first minute of the bar; the other symbols' minutes before that moment
are worked first (their fills and stops come before the decision), and while they are worked the main
symbol stands at the close of its newest minute before (no tick of it yet). At the decision it has its
first minute: its price is that minute's open, as it is when nothing was reached before.

Figures: EURUSD (main) flat at 1.10000 until 01:59; its 02:00 bar has no minute before 02:05, which opens
at 1.10200 and stays. GBPUSD flat at 1.30000; a long of 0.1 lot holds a stop-loss at 1.29500. Spread 0.
At 02:00 the EA buys 1 lot of EURUSD: bought at 1.10200, closed at the end at 1.10200, 0.00. Where GBPUSD's
02:02 minute dips to 1.29000 and takes the stop-loss (-0.1 x 100,000 x 0.005 = -50.00 USD), the EA was
shown EURUSD's 01:59 close, 1.10000, and bought there: +200.00 USD at the end, money the market never gave.
AUDUSD likewise: flat at 0.66000 until 01:59, its first minute of the 02:00 bar is 02:05 too, at 0.66300,
and the EA reads 0.66300 there whatever GBPUSD did before (it was shown the 01:59 close, 0.66000).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.resample import resample
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

T0 = pd.Timestamp("2024-01-02", tz="UTC")
SEEN: dict = {}


def _minutes(symbol: str, rows: dict[int, tuple[float, float, float, float]]) -> pd.DataFrame:
    """M1 bars at the minutes of ``rows`` (minute from T0 -> o, h, l, c) only: the others are missing."""
    minutes = sorted(rows)
    index = pd.DatetimeIndex([T0 + pd.Timedelta(minutes=m) for m in minutes])
    o, h, lo, c = (np.array([rows[m][i] for m in minutes]) for i in range(4))
    n = len(minutes)
    cols = {"open": o, "high": h, "low": lo, "close": c, "tick_volume": np.ones(n, dtype=np.int64),
            "real_volume": np.zeros(n, dtype=np.int64), "spread": np.zeros(n, dtype=np.int32)}  # fmt: skip
    return make_frame(cols, index, CandleMeta(symbol, Timeframe.M1, 5, UTC, "test"))


class _BuyAtTheThirdBar(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD", "AUDUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(0.1, symbol="GBPUSD", sl=1.295) is not None
        elif len(self.bars) == 2:
            SEEN["bid"] = self.bid_of("EURUSD")
            SEEN["aud"] = self.bid_of("AUDUSD")
            assert self.buy(1.0, symbol="EURUSD") is not None


@pytest.mark.parametrize("dip", [False, True], ids=["nothing reached before", "a stop-loss reached before"])
def test_ohlc1m_the_main_symbol_is_priced_at_its_first_minute_when_it_decides(dip):
    SEEN.clear()
    eurusd = {m: (1.1,) * 4 for m in range(0, 120)} | {m: (1.102,) * 4 for m in range(125, 180)}
    gbpusd = {m: (1.3,) * 4 for m in range(0, 180)}
    audusd = {m: (0.66,) * 4 for m in range(0, 120)} | {m: (0.663,) * 4 for m in range(125, 180)}
    if dip:
        gbpusd[122] = (1.3, 1.3, 1.29, 1.3)
    m1 = {"EURUSD": _minutes("EURUSD", eurusd), "GBPUSD": _minutes("GBPUSD", gbpusd),
          "AUDUSD": _minutes("AUDUSD", audusd)}  # fmt: skip
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    account = AccountConfig(deposit=10_000.0, spread=0)
    result = Backtest(frames, _BuyAtTheThirdBar, model="ohlc1m", m1=m1, account=account, forward=None).run()
    assert (SEEN["bid"], SEEN["aud"]) == (pytest.approx(1.102), pytest.approx(0.663))
    trades = result.trades.set_index("symbol")
    assert trades.loc["EURUSD", "entry_price"] == pytest.approx(1.102)
    assert trades.loc["EURUSD", "profit"] == 0.0
    assert trades.loc["GBPUSD", "exit_reason"] == ("sl" if dip else "end of test")
    assert trades.loc["GBPUSD", "profit"] == (-50.0 if dip else 0.0)
