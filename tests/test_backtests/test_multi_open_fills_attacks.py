"""Open prices with several symbols: a position filled or changed inside a bar is valued, while the other
symbols work their ranges, at its symbol's close, never at the open from before the fill.

In open prices each symbol works its bar's range with the other symbols standing still
(``backtests.multi_replay``). A position another symbol's range filled earlier in the same bar, valued at
that symbol's open, would show the profit from the open to the fill: money the account never had, paying
for margin (a pending order accepted where MetaTrader's trade server refuses it: "no money", 10019) and
holding off stop-outs. Every case below is worked by hand; each failed before the rule (the open's profit
paid the margin or hid the stop-out).

Shared figures: leverage 100, spread 0, 5-digit symbols without specifications (profit in dollars: 1 lot
is 1 USD a point). EURUSD's 01:00 bar rises 1.09600 -> 1.10200, closes 1.10150 (open = low); GBPUSD's
falls 1.30000 -> 1.29400, closes 1.29450 (open = high). A sell limit of EURUSD at 1.10100 and a buy limit of
GBPUSD at 1.29500 are each met inside the bar, and neither price comes back to its open after the fill.
Margins: 100,000 x 1.10100 / 100 = 1,101 USD, 100,000 x 1.29500 / 100 = 1,295 USD. The EA's first decision
is at 01:00 (the first bar is history), at the opens EURUSD 1.09600, GBPUSD 1.30000.
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
from tests.flat_candles import T0, Bar, flat_frame

H = pd.Timedelta(hours=1)
EURUSD_BARS = ("EURUSD", 1.1015, {0: (1.096,) * 4, 1: (1.096, 1.102, 1.096, 1.1015)})
GBPUSD_BARS = ("GBPUSD", 1.2945, {0: (1.3,) * 4, 1: (1.3, 1.3, 1.294, 1.2945)})


def _account(deposit: float) -> AccountConfig:
    return AccountConfig(deposit=deposit, spread=0, leverage=100.0, stop_out_level=50.0)


def _hours(symbol: str, base: float, special: dict[int, Bar]) -> pd.DataFrame:
    """Four H1 bars at ``base``, bar i replaced by ``special[i]`` (o, h, l, c)."""
    return flat_frame(symbol, base, special, 4, Timeframe.H1)


def _frames(*bars) -> dict[str, pd.DataFrame]:
    return {symbol: _hours(symbol, base, special) for symbol, base, special in bars}


def _limits(result) -> dict[str, str]:
    """Each symbol's pending order's final state."""
    orders = result.orders[result.orders["type"].isin(["sell_limit", "buy_limit"])]
    return dict(zip(orders["symbol"], orders["state"], strict=True))


class _TwoLimits(ExpertAdvisor):
    """At 01:00 a sell limit of 1 lot of EURUSD at 1.10100 and a buy limit of 1 lot of GBPUSD at 1.29500."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.sell_limit(1.0, 1.101, symbol="EURUSD") is not None
            assert self.buy_limit(1.0, 1.295, symbol="GBPUSD") is not None


class _TwoLimitsGbpFirst(_TwoLimits):
    symbols = ("GBPUSD", "EURUSD")


def test_open_prices_two_fills_in_one_bar_never_hold_more_margin_than_the_equity_could_carry():
    # 2,000 USD. EURUSD works its range first: its limit fills (free margin 2,000 - 1,101 = 899). GBPUSD's
    # range then values the short at EURUSD's close 1.10150: -50, equity 1,950, margin needed 2,396: no
    # money (10019). At EURUSD's open 1.09600 the short showed +500 (equity 2,500) and both filled.
    result = Backtest(
        _frames(EURUSD_BARS, GBPUSD_BARS), _TwoLimits, account=_account(2_000.0), forward=None
    ).run()
    assert _limits(result) == {"EURUSD": "filled", "GBPUSD": "rejected"}
    assert len(result.trades) == 1 and [r["retcode"] for r in result.rejected] == [10019]


def test_open_prices_the_other_order_of_the_symbols_refuses_the_other_fill():
    # GBPUSD is the main symbol: its range is worked first, its limit fills (free margin 2,000 - 1,295 =
    # 705). EURUSD's range values the long at GBPUSD's close 1.29450: -50, equity 1,950 < 2,396: refused.
    # At GBPUSD's open 1.30000 the long showed +500 and paid for the short.
    frames = _frames(GBPUSD_BARS, EURUSD_BARS)
    result = Backtest(frames, _TwoLimitsGbpFirst, account=_account(2_000.0), forward=None).run()
    assert _limits(result) == {"GBPUSD": "filled", "EURUSD": "rejected"}
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert result.trades["symbol"].tolist() == ["GBPUSD"]


class _LongAndLimit(ExpertAdvisor):
    """At 01:00 a buy of 1 lot of GBPUSD at 1.30000 and a sell limit of 1 lot of EURUSD at 1.10100."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(1.0, symbol="GBPUSD") is not None
            assert self.sell_limit(1.0, 1.101, symbol="EURUSD") is not None


def test_open_prices_a_stop_out_the_opens_phantom_profit_hid_happens_where_the_rules_put_it():
    # 2,500 USD; GBPUSD long 1 lot at 1.30000 (margin 1,300). 01:00: EURUSD's range fills the sell limit at
    # 1.10100 (equity 2,500 >= 1,300 + 1,101 = 2,401; at its own worst, 1.10200, the level is 2,400 /
    # 2,401 = 99.96%). GBPUSD's range falls to 1.28500 with the short at EURUSD's close 1.10150 (-50): the
    # level reaches 50% (equity 1,200.50) where 2,500 - 50 + (bid - 1.30000) x 100,000 = 1,200.50, bid
    # 1.287505, first whole point beyond it 1.28750. The most losing position there is the GBPUSD long
    # (-1,250 against the short's -50): stopped out at 1.28750, 01:00's bar, balance 1,250. Valued at
    # EURUSD's open 1.09600 the short showed +500: the level needed a bid of 1.282005, below the low.
    frames = _frames(EURUSD_BARS, ("GBPUSD", 1.285, {0: (1.3,) * 4, 1: (1.3, 1.3, 1.285, 1.29)}))
    result = Backtest(frames, _LongAndLimit, account=_account(2_500.0), forward=None).run()
    trades = result.trades
    stopped = trades[trades["exit_reason"] == "stop out"]
    assert stopped["symbol"].tolist() == ["GBPUSD"]
    assert stopped["exit_price"].iloc[0] == pytest.approx(1.2875)
    assert stopped["exit_time"].iloc[0] == T0 + H
    assert stopped["profit"].iloc[0] == pytest.approx(-1_250.0)
    # the short stays to the end of the test, at EURUSD's last close 1.10150: -50
    rest = trades[trades["exit_reason"] != "stop out"]
    assert rest["symbol"].tolist() == ["EURUSD"] and rest["profit"].iloc[0] == pytest.approx(-50.0)
    assert result.stats["final_balance"] == pytest.approx(1_200.0)


class _ThreeLimits(_TwoLimits):
    """``_TwoLimits`` and a buy limit of 1 lot of AUDUSD at 0.66000."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")

    def on_bar(self):
        super().on_bar()
        if len(self.bars) == 1:
            assert self.buy_limit(1.0, 0.66, symbol="AUDUSD") is not None


def test_open_prices_a_third_symbols_order_is_judged_with_both_earlier_fills_at_their_closes():
    # 3,000 USD. EURUSD's limit fills (free margin 3,000 - 1,101 = 1,899); GBPUSD's fills with the short at
    # 1.10150 (-50): 2,950 - 1,101 = 1,849 >= 1,295. AUDUSD's range (0.66500 -> 0.65900, close 0.65950)
    # meets its limit at 0.66000 (margin 660) with both at their closes (-50 each): equity 2,900, margin
    # 1,101 + 1,295 + 660 = 3,056: no money. At their opens (+500 each) the equity showed 4,000.
    audusd = ("AUDUSD", 0.6595, {0: (0.665,) * 4, 1: (0.665, 0.665, 0.659, 0.6595)})
    frames = _frames(EURUSD_BARS, GBPUSD_BARS, audusd)
    result = Backtest(frames, _ThreeLimits, account=_account(3_000.0), forward=None).run()
    assert _limits(result) == {"EURUSD": "filled", "GBPUSD": "filled", "AUDUSD": "rejected"}
    assert [(r["symbol"], r["retcode"]) for r in result.rejected] == [("AUDUSD", 10019)]


class _ShortThenAdd(_TwoLimits):
    """At 01:00 a sell of 1 lot of EURUSD at 1.09600, then ``_TwoLimits``' two limits."""

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.sell(1.0, symbol="EURUSD") is not None
        super().on_bar()


def test_open_prices_a_netting_add_inside_the_bar_is_valued_at_its_symbols_close():
    # 3,500 USD, netting. EURUSD short 1 lot at 1.09600 (margin 1,096). 01:00: the sell limit at 1.10100
    # adds a lot (equity at the fill 3,500 - 500 = 3,000 >= 1,096 + 1,101 = 2,197): 2 lots at 1.09850.
    # GBPUSD's limit is judged with the 2 lots at EURUSD's close 1.10150: 2 x -300 = -600, equity 2,900 <
    # 2,197 + 1,295 = 3,492: no money. At EURUSD's open 1.09600 the 2 lots showed +500 (4,000): filled.
    frames = _frames(EURUSD_BARS, GBPUSD_BARS)
    result = Backtest(frames, _ShortThenAdd, account=_account(3_500.0), forward=None).run()
    assert _limits(result) == {"EURUSD": "filled", "GBPUSD": "rejected"}
    assert [(r["symbol"], r["retcode"]) for r in result.rejected] == [("GBPUSD", 10019)]
    # one EURUSD position of 2 lots at 1.09850, closed at the end of the test at 1.10150: -600
    assert result.trades["symbol"].tolist() == ["EURUSD"]
    assert result.trades["lots"].iloc[0] == pytest.approx(2.0)
    assert result.trades["profit"].iloc[0] == pytest.approx(-600.0)


def _minutes(symbol: str, first: float, moves: dict[int, tuple[float, float, float, float]], rest: float):
    """Four hours of M1 bars: flat at ``first`` to 01:00's first minute, ``moves`` (o, h, l, c) by minute,
    flat at ``rest`` after the last of them."""
    n = 240
    last = max(moves)
    level = np.where(np.arange(n) <= last, first, rest)
    cols = {c: level.copy() for c in ("open", "high", "low", "close")}
    for i, (o, h, lo, c) in moves.items():
        cols["open"][i], cols["high"][i], cols["low"][i], cols["close"][i] = o, h, lo, c
    cols.update(
        tick_volume=np.ones(n, dtype=np.int64),
        real_volume=np.zeros(n, dtype=np.int64),
        spread=np.zeros(n, dtype=np.int32),
    )
    return make_frame(
        cols, pd.date_range(T0, periods=n, freq="min"), CandleMeta(symbol, Timeframe.M1, 5, UTC, "t")
    )


def test_ohlc1m_of_the_same_prices_gives_the_same_refusal():
    # The same hours built from minutes: EURUSD rises to 1.10200 in its 01:01 minute (its limit fills
    # there), GBPUSD falls to 1.29400 in its 01:10 minute. In time order the short exists first, at most at
    # 0 profit (EURUSD stays in 1.10100-1.10200 after the fill): GBPUSD's limit is refused as in open
    # prices (equity at most 2,000 < 2,396).
    m1 = {
        "EURUSD": _minutes("EURUSD", 1.096, {61: (1.096, 1.102, 1.096, 1.102)}, 1.1015),
        "GBPUSD": _minutes("GBPUSD", 1.3, {70: (1.3, 1.3, 1.294, 1.294)}, 1.2945),
    }
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    assert frames["EURUSD"].iloc[1][["open", "high", "low", "close"]].tolist() == list(EURUSD_BARS[2][1])
    assert frames["GBPUSD"].iloc[1][["open", "high", "low", "close"]].tolist() == list(GBPUSD_BARS[2][1])
    account = _account(2_000.0)
    minutes = Backtest(frames, _TwoLimits, model="ohlc1m", m1=m1, account=account, forward=None).run()
    opens = Backtest(frames, _TwoLimits, account=account, forward=None).run()
    assert _limits(minutes) == _limits(opens) == {"EURUSD": "filled", "GBPUSD": "rejected"}
    assert [r["retcode"] for r in minutes.rejected] == [r["retcode"] for r in opens.rejected] == [10019]


def test_open_prices_a_fill_worth_less_than_the_close_is_valued_at_the_fill():
    # EURUSD's 01:00 bar rises to 1.10200 and closes at 1.09900, below the sell limit's 1.10100: the short
    # shows +200 at the close, 0 at its fill. Which one GBPUSD's fill met is unknown in open prices; the
    # worse for the account is taken: 2,300 + 0 = 2,300 < 2,396: no money. (At the close, 2,500 >= 2,396
    # would have admitted it with money the account may not have had yet.)
    eurusd = ("EURUSD", 1.099, {0: (1.096,) * 4, 1: (1.096, 1.102, 1.096, 1.099)})
    result = Backtest(_frames(eurusd, GBPUSD_BARS), _TwoLimits, account=_account(2_300.0), forward=None).run()
    assert _limits(result) == {"EURUSD": "filled", "GBPUSD": "rejected"}
    assert [(r["symbol"], r["retcode"]) for r in result.rejected] == [("GBPUSD", 10019)]


class _LongThenReverse(_TwoLimits):
    """At 01:00 a buy of 1 lot of EURUSD at 1.09600, a sell limit of 2 lots of EURUSD at 1.10100 and a
    buy limit of 1 lot of GBPUSD at 1.29500."""

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(1.0, symbol="EURUSD") is not None
            assert self.sell_limit(2.0, 1.101, symbol="EURUSD") is not None
            assert self.buy_limit(1.0, 1.295, symbol="GBPUSD") is not None


def test_open_prices_a_netting_reversal_inside_the_bar_leaves_its_new_leg_at_a_price_after_it():
    # 1,800 USD, netting. EURUSD long 1 lot at 1.09600 (margin 1,096). 01:00: the 2-lot sell limit at
    # 1.10100 closes the long (+500 booked, balance 2,300) and opens a short of 1 lot at 1.10100 (margin
    # 1,101; equity at the fill 2,300). GBPUSD's limit is judged with the short at EURUSD's close 1.10150
    # (-50; at the fill 0): equity 2,250 < 1,101 + 1,295 = 2,396: no money. At EURUSD's open 1.09600 the
    # short showed +500 (2,800): filled.
    frames = _frames(EURUSD_BARS, GBPUSD_BARS)
    result = Backtest(frames, _LongThenReverse, account=_account(1_800.0), forward=None).run()
    assert _limits(result) == {"EURUSD": "filled", "GBPUSD": "rejected"}
    assert [(r["symbol"], r["retcode"]) for r in result.rejected] == [("GBPUSD", 10019)]
    trades = result.trades
    assert trades["type"].tolist() == ["buy", "sell"] and trades["profit"].tolist() == pytest.approx(
        [500, -50]
    )


class _Watcher(_TwoLimits):
    """``_TwoLimits``, recording the account's equity and free margin at each bar's decision."""

    def on_init(self):
        self.seen = []

    def on_bar(self):
        super().on_bar()
        account = self.account
        self.seen.append((account.equity, account.free_margin))


def test_open_prices_the_eas_next_decision_sees_the_filled_position_at_the_next_open():
    # After the 01:00 bar the short of 1 lot at 1.10100 stands at 02:00's open 1.10150: equity 2,000 - 50 =
    # 1,950, free margin 1,950 - 1,101 = 849; nothing of the 01:00 bar's standing is left behind.
    result = Backtest(
        _frames(EURUSD_BARS, GBPUSD_BARS), _Watcher, account=_account(2_000.0), forward=None
    ).run()
    seen = result.ea_instance.seen
    assert len(seen) == 3 and seen[0] == pytest.approx((2_000.0, 2_000.0))  # 01:00, before any fill
    assert seen[1] == pytest.approx((1_950.0, 849.0)) and seen[2] == pytest.approx((1_950.0, 849.0))


class _HedgeStopAndLimit(_TwoLimits):
    """At 01:00 (hedging) a buy of 1 lot of EURUSD at 1.09600 with its stop-loss at 1.09500, and
    ``_TwoLimits``' two limits."""

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(1.0, sl=1.095, symbol="EURUSD") is not None
        super().on_bar()


def test_open_prices_deals_at_two_prices_in_one_range_leave_the_symbol_at_its_close():
    # 2,500 USD, hedging. EURUSD long 1 lot at 1.09600 (SL 1.09500). EURUSD's 01:00 bar dips to 1.09400 and
    # rises to 1.10200, closing at 1.10150; its range fills the sell limit at 1.10100 (equity there 3,000:
    # the long +500; margin 1,096 + 1,101) and then meets the long's SL: -100, balance 2,400. Which came
    # first is unknown, so neither deal's price is where the short surely stood after both: the close is.
    # There the short is -50: equity 2,350 < 1,101 + 1,295 = 2,396, GBPUSD's limit refused. At the stop's
    # 1.09500 the short would show +600 (3,000), at the open +500 (2,900): both admitted it.
    eurusd = ("EURUSD", 1.1015, {0: (1.096,) * 4, 1: (1.096, 1.102, 1.094, 1.1015)})
    account = AccountConfig(deposit=2_500.0, spread=0, leverage=100.0, stop_out_level=50.0, hedging=True)
    result = Backtest(_frames(eurusd, GBPUSD_BARS), _HedgeStopAndLimit, account=account, forward=None).run()
    assert _limits(result) == {"EURUSD": "filled", "GBPUSD": "rejected"}
    assert [(r["symbol"], r["retcode"]) for r in result.rejected] == [("GBPUSD", 10019)]
    trades = result.trades
    assert trades["exit_reason"].tolist() == ["sl", "end of test"]
    assert trades["profit"].tolist() == pytest.approx([-100.0, -50.0])
