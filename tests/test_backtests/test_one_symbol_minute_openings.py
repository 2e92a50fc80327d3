"""One symbol's bar in 1 minute OHLC opens at its first minute, as every symbol of a several-symbol run does:
the tester's first tick of the bar is that minute's open at its time (MetaTrader 5 Help, "Real and Generated
Ticks"), so a bar whose first minute comes late (02:07 for the 02:00 bar) has its opening checks (expiries,
gap fills, gap SL/TP, the stop-out) and the EA's decision made and stamped at 02:07.

Each test runs the one-symbol replay and the same symbol alone through the several-symbol walk (screened,
and with every minute walked): one rule, the same tables. Flat minutes (open = high = low = close) at the
minutes given only, spread 0, leverage 500; a point of EURUSD is 1.00 USD a lot.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import backtests.merged as merged
from backtests import AccountConfig, Backtest
from datafeeds import load_candles, resample
from strategies.base import ExpertAdvisor
from tests.test_backtests.test_multi_minutes_openings import H, _at, _in_time_order, _minutes

ROUTES = pytest.mark.parametrize("route", ["one-symbol", "screened", "every-minute"])


def _run(ea, rows: list, route: str, monkeypatch, deposit: float = 10_000.0):
    """``ea`` on EURUSD's flat ``rows`` (minutes from T0, price) resampled to H1, by ``route``."""
    m1 = _minutes("EURUSD", rows)
    return _backtest(ea, resample(m1, "H1"), m1, route, monkeypatch, deposit)


def _backtest(ea, frame, m1, route: str, monkeypatch, deposit: float, **account):
    config = AccountConfig(deposit=deposit, spread=0, leverage=500.0, stop_out_level=50.0, **account)
    if route == "one-symbol":
        test = Backtest(frame, ea, model="ohlc1m", m1=m1, account=config, forward=None)
        assert test.multi is None
    else:
        if route == "every-minute":
            monkeypatch.setattr(merged, "_stop_out_possible", lambda *args: True)
        test = Backtest(
            {"EURUSD": frame}, ea, model="ohlc1m", m1={"EURUSD": m1}, account=config, forward=None
        )
    result = test.run()
    _in_time_order(result)
    return result


class _LimitExpiring(ExpertAdvisor):
    """At the first decision a buy limit of 1 lot at 1.09500 expiring at ``expiry`` (None: never); every
    decision's clock recorded in ``seen``."""

    expiry: pd.Timestamp | None = None
    seen: list

    def on_bar(self):
        self.seen.append(self.time_current)
        if len(self.bars) == 1:
            self.buy_limit(1.0, 1.095, expiration=self.expiry)


# EURUSD at 1.10000 from 00:00; the 02:00 bar's first minute comes at 02:07, at 1.09000: a gap through the
# buy limit at 1.09500; back at 1.10000 from 03:00 to the end of the test (03:59).
EUR = [(0, 1.1), (H, 1.1), (2 * H + 7, 1.09), (2 * H + 10, 1.09), (3 * H, 1.1), (4 * H - 1, 1.1)]


@pytest.mark.parametrize(
    ("expiry", "expired"), [(5, True), (7, True), (8, False)], ids=["between", "at-its-first", "after"]
)
@ROUTES
def test_an_order_expired_before_a_late_first_minute_of_a_bar_is_retired_not_filled_by_its_gap(
    route, expiry, expired, monkeypatch
):
    """The buy limit expires at 02:05 (or at 02:07 itself), by the bar's first price (02:07): MetaTrader
    retires it there (``ORDER_STATE_EXPIRED``: its expiration has come) and the gap never fills it: no
    trade, net profit 0.00. The one-symbol walk made the bar's checks at its opening time, 02:00, where the
    order had not expired, and filled it at the first minute's open, 1.09000: (1.10000 - 1.09000) x 100,000
    = +1,000.00 at the end of the test, money from a fill after the order had ceased to exist. Expiring at
    02:08 it is still working at 02:07 and the gap fills it there: +1,000.00."""
    ea = type("Expiring", (_LimitExpiring,), {"expiry": _at(2 * H + expiry), "seen": []})
    result = _run(ea, EUR, route, monkeypatch)
    limit = result.orders[result.orders["type"] == "buy_limit"].iloc[0]
    state = "expired" if expired else "filled"
    assert (limit["state"], limit["time_done"]) == (state, _at(2 * H + 7))  # was filled at 02:00
    assert len(result.trades) == (0 if expired else 1)
    assert result.stats["total_net_profit"] == pytest.approx(0.0 if expired else 1_000.0)  # was +1,000.00


@ROUTES
def test_a_late_first_minutes_gap_fill_and_the_decision_are_stamped_at_that_minute(route, monkeypatch):
    """Without an expiry the gap fills the limit at 1.09000 (better than its price, as a gap fills a limit),
    +1,000.00 at 1.10000 by the end: the fill is stamped 02:07, the bar's first price, and the EA's clock
    there reads 02:07 (MetaTrader's ``TimeCurrent``, the time of the newest price); the one-symbol walk
    stamped both at 02:00, seven minutes before the price they read had come."""
    ea = type("Filled", (_LimitExpiring,), {"seen": []})
    result = _run(ea, EUR, route, monkeypatch)
    assert ea.seen == [_at(H), _at(2 * H + 7), _at(3 * H)]  # was 01:00, 02:00, 03:00
    trade = result.trades.iloc[0]
    assert (trade["entry_time"], trade["entry_price"]) == (_at(2 * H + 7), 1.09)  # was at 02:00
    assert trade["profit"] == pytest.approx(1_000.0)
    assert result.orders["time_setup"].iloc[0] == _at(H)


class _Busy(ExpertAdvisor):
    """Every decision: a market order with SL/TP, a pending order on either side expiring within the hour,
    and now and then a close, so gap fills, expiries, stops and the stop-out all come at openings."""

    def on_bar(self):
        n = len(self.bars)
        price = self.ask
        step = 0.0005 * (1 + n % 4)
        side = 1 if n % 2 else -1
        if n % 5 == 0:
            for p in self.positions():
                self.close(p.ticket)
        if n % 3 == 0:
            (self.buy if side > 0 else self.sell)(
                1.0, sl=round(price - side * 3 * step, 5), tp=round(price + side * 2 * step, 5)
            )
        expiry = self.time_current + pd.Timedelta(minutes=40 + 7 * (n % 5))
        self.buy_limit(1.0, round(price - step, 5), expiration=expiry)
        self.sell_stop(1.0, round(price - 2 * step, 5), expiration=expiry)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("route", ["screened", "every-minute"])
def test_one_symbol_alone_gives_the_same_tables_on_either_walk(route, seed, monkeypatch):
    """Synthetic EURUSD minutes with the first minutes of many H1 bars left out (bars opening late): the
    one-symbol replay and the several-symbol walk with that symbol alone give identical orders, deals and
    trades, so one rule stamps and judges a bar's opening in both."""
    m1 = load_candles("synthetic", "EURUSD", "M1", "2024-01-02", "2024-01-06", seed=seed)
    frame = resample(m1, "H1")
    rng = np.random.default_rng(seed)
    late = m1.index.minute < rng.integers(0, 12, len(m1))  # each hour's first 0 to 11 minutes missing
    late &= m1.index.floor("h").isin(frame.index[rng.random(len(frame)) < 0.5])
    m1 = m1[~late]
    frame = frame[frame.index.isin(m1.index.floor("h"))]
    one = _backtest(_Busy, frame, m1, "one-symbol", monkeypatch, 2_000.0)
    both = _backtest(_Busy, frame, m1, route, monkeypatch, 2_000.0)
    pd.testing.assert_frame_equal(one.orders, both.orders)
    pd.testing.assert_frame_equal(one.deals, both.deals)
    pd.testing.assert_frame_equal(one.trades, both.trades)
    assert one.stats["total_net_profit"] == both.stats["total_net_profit"]
    assert len(one.deals) > 40 and (one.orders["state"] == "expired").sum() > 20
