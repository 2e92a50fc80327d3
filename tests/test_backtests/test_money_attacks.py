"""Money the broker booked differently from MetaTrader 5, found by attacking it; each test is named after
the defect and its figures are computed by hand in its docstring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker import Broker
from datafeeds import CandleMeta, make_frame, resample
from datafeeds.timeframes import Timeframe
from strategies import ExpertAdvisor

POINT = 1e-5


def broker(rows, **cfg) -> Broker:
    """rows: (open, high, low, close) per hourly bar from a Monday; no spread."""
    a = np.array(rows, dtype=float)
    time = pd.date_range("2024-01-01", periods=len(a), freq="h", tz="UTC")
    config = AccountConfig(**{"spread": 0, **cfg})
    return Broker(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.zeros(len(a)), time, POINT, config)


def minutes(rows, start="2024-01-01", spread=0) -> pd.DataFrame:
    """M1 candles from (open, high, low, close[, spread]) rows."""
    a = np.array([r[:4] for r in rows], dtype=float)
    spreads = np.array([r[4] if len(r) > 4 else spread for r in rows])
    index = pd.date_range(start, periods=len(a), freq="min", tz="UTC")
    data = {"open": a[:, 0], "high": a[:, 1], "low": a[:, 2], "close": a[:, 3], "spread": spreads}
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.M1, 5))


def falling(start: float, points: int, steps: int) -> list[tuple]:
    """``steps`` minutes, each ``points`` below the last: a straight fall."""
    out, p = [], start
    for _ in range(steps):
        q = round(p - points * POINT, 5)
        out.append((p, p, q, q))
        p = q
    return out


# -- free margin at a fill inside a bar ---------------------------------------------------------------------
def test_a_pending_fill_inside_a_bar_checks_the_free_margin_at_the_fill_not_at_the_bars_open():
    """Long 0.5 lot at 1.10000 (margin 550 at 1:100), a buy limit of 0.3 lot at 1.09700. The bar falls to
    1.09600: when the limit is reached the long floats -150, equity 850, and the deal would hold 550 +
    0.3 x 100,000 x 1.097 / 100 = 879.10 of margin: MetaTrader refuses it (10019). Valued at the bar's
    open (equity 1,000), it was accepted."""
    b = broker([(1.1, 1.1, 1.1, 1.1), (1.1, 1.1001, 1.096, 1.0965)], deposit=1000.0, stop_out_level=0)
    b.bar_open(0)
    assert b.order(+1, 0.5, None, None, 0, "") is not None
    ticket = b.pending("buy_limit", 0.3, 1.097, None, None, None, None, 0, "")
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)
    assert [(p.lots, p.price_open) for p in b.positions()] == [(0.5, 1.1)]
    order = b.orders_frame().set_index("ticket").loc[ticket]
    assert order.state == "rejected" and b.last_retcode == 10019


class _LimitUnderLong(ExpertAdvisor):
    def on_bar(self) -> None:
        if len(self.bars) == 2:
            self.buy(0.5)
            self.buy_limit(0.3, 1.097)


def test_a_pending_fill_inside_a_minute_checks_the_free_margin_at_that_minute_in_ohlc1m():
    """The same account in "1 minute OHLC": the limit is reached 30 minutes into the hour, when the long
    (0.5 lot at the ask 1.10001) floats -150.50: equity 849.50 against 550.005 + 329.10 of margin."""
    m1 = minutes(
        [(1.1, 1.1, 1.1, 1.1)] * 120 + falling(1.1, 10, 40) + [(1.096, 1.096, 1.096, 1.096)] * 80, spread=1
    )
    h1 = resample(m1, "H1")
    account = AccountConfig(deposit=1000.0, stop_out_level=0)
    rep = Backtest(h1, _LimitUnderLong, model="ohlc1m", m1=m1, forward=None, account=account).run()
    assert rep.trades["lots"].tolist() == [0.5]
    limit = rep.orders[rep.orders["type"] == "buy_limit"].iloc[0]
    assert limit.state == "rejected" and limit.time_done == pd.Timestamp("2024-01-01 02:30", tz="UTC")
    assert [r["retcode"] for r in rep.rejected] == [10019]


# -- the stop-out closes at the price where the level was crossed --------------------------------------------
def test_a_stop_out_closes_every_position_it_takes_at_the_price_where_the_level_was_crossed():
    """Hedging, 1:1000, hedged volume holding no margin: short 1 lot at 1.09000 and long 2 lots at 1.09500,
    deposit 654.75. From the open at 1.10000 the bid falls: equity 654.75 + (bid - 1.10000) x 100,000
    against 109.50 of margin reaches 50 % at 1.09400. There the short (-400) is the most losing: closed,
    balance 254.75; the long left floats -200, equity 54.75 against 219 of margin (25 %): closed at the
    same price, -200. Balance 54.75. It was closed at 1.09427, a price passed before the level was crossed
    (where the long alone would cross): -146, 54 USD in the EA's favour."""
    rows = [(1.09, 1.09, 1.09, 1.09), (1.095, 1.095, 1.095, 1.095), (1.1, 1.1, 1.09, 1.09)]
    b = broker(rows, deposit=654.75, leverage=1000.0, hedging=True, margin_hedged=0.0)
    b.bar_open(0)
    b.order(-1, 1.0, None, None, 0, "")
    b.bar_range(0)
    b.bar_open(1)
    b.order(+1, 2.0, None, None, 0, "")
    b.bar_range(1)
    b.bar_open(2)
    b.bar_range(2)
    trades = b.trades_frame()
    assert trades[["type", "exit_price", "exit_reason"]].values.tolist() == [
        ["sell", 1.094, "stop out"],
        ["buy", 1.094, "stop out"],
    ]
    assert trades["profit"].tolist() == pytest.approx([-400.0, -200.0])
    assert b.balance == pytest.approx(54.75)


class _HedgeThenHold(ExpertAdvisor):
    def on_bar(self) -> None:
        if len(self.bars) == 1:
            self.buy(1.0)
        elif len(self.bars) == 2:
            self.sell(1.0)


def test_a_spread_that_widens_inside_a_bar_stops_out_a_hedged_account_in_ohlc1m():
    """Hedging, 1:1000, hedged volume charged as 10,000 units a lot, deposit 560. Long 1 lot at 1.10000,
    the bid falls to 1.09500 (equity 60); short 1 lot there: margin 1 x 10,000 x 1.0975 / 1000 = 10.975.
    At 02:30 the minute's spread is 60 points: equity 60 - 60 = 0, below 50 % of the margin. MetaTrader
    closes the most losing position, the long (-500, balance 60), then the short is alone: equity 0
    against 109.50 of margin, closed at the ask 1.09560 (-60). Balance 0. The minutes were searched for a
    stop-out price only, which a fully hedged account has none of: nothing was closed, balance 60."""
    flat = [(1.1, 1.1, 1.1, 1.1)] * 60
    bottom = [(1.095, 1.095, 1.095, 1.095)]
    m1 = minutes(flat + falling(1.1, 10, 50) + bottom * 10 + bottom * 30 + [(*bottom[0], 60)] + bottom * 29)
    h1 = resample(m1, "H1")
    account = AccountConfig(
        deposit=560.0, leverage=1000.0, hedging=True, margin_hedged=10_000.0, spread=None, missing_spread=0
    )
    rep = Backtest(h1, _HedgeThenHold, model="ohlc1m", m1=m1, forward=None, account=account).run()
    trades = rep.trades
    assert trades[["type", "exit_price", "exit_reason"]].values.tolist() == [
        ["buy", 1.095, "stop out"],
        ["sell", 1.0956, "stop out"],
    ]
    assert trades["exit_time"].tolist() == [pd.Timestamp("2024-01-01 02:30", tz="UTC")] * 2
    assert trades["profit"].tolist() == pytest.approx([-500.0, -60.0])
    assert rep.stats["final_balance"] == pytest.approx(0.0)


class _FourLongThreeShort(ExpertAdvisor):
    def on_bar(self) -> None:
        if len(self.bars) == 2:
            self.buy(4.0)
            self.sell(3.0)


def test_a_stop_out_in_ohlc1m_is_found_when_a_later_minute_of_the_bar_has_a_wider_spread():
    """Hedging, 1:10,000, hedged volume holding no margin, deposit 155: long 4 lots and short 3 lots at
    1.10000 hold 1 x 100,000 x 1.1 / 10,000 = 11 of margin. Equity is 155 + (bid - 1.10000) - 3 x spread
    (in points, 1 USD each): at 02:10 the bid falls to 1.09880 with a spread of 10 points, equity 5 <= 5.50.
    MetaTrader stops out there: the long (-480, balance -325), then the short alone (equity 5 against 33)
    at the ask 1.09890 (+330). Balance 5. The minutes were searched for the stop-out price at the widest
    spread of the hour (100 points at 02:40), which lies above every minute's range: nothing was closed,
    and equity sat at -155 at 02:40."""
    flat = [(1.1, 1.1, 1.1, 1.1)] * 130
    low = (1.0988, 1.0988, 1.0988, 1.0988, 10)
    m1 = minutes(
        flat + [(1.1, 1.1, 1.0988, 1.0988, 10)] + [low] * 29 + [(1.0999, 1.0999, 1.0999, 1.0999, 100)] * 80
    )
    h1 = resample(m1, "H1")
    account = AccountConfig(
        deposit=155.0, leverage=10_000.0, hedging=True, margin_hedged=0.0, spread=None, missing_spread=0
    )
    rep = Backtest(h1, _FourLongThreeShort, model="ohlc1m", m1=m1, forward=None, account=account).run()
    trades = rep.trades
    assert trades[["type", "lots", "exit_price", "exit_reason"]].values.tolist() == [
        ["buy", 4.0, 1.0988, "stop out"],
        ["sell", 3.0, 1.0989, "stop out"],
    ]
    assert trades["exit_time"].tolist() == [pd.Timestamp("2024-01-01 02:10", tz="UTC")] * 2
    assert trades["profit"].tolist() == pytest.approx([-480.0, 330.0])
    assert rep.stats["final_balance"] == pytest.approx(5.0)


# -- money of a symbol quoted in another currency than the deposit's ----------------------------------------
class _BuyThenClose(ExpertAdvisor):
    def on_bar(self) -> None:
        if len(self.bars) == 1:
            self.buy(1.0)
        elif len(self.bars) == 2:
            self.close()


def yen_bars() -> pd.DataFrame:
    """USDJPY hours (3 digits): the long bought at 109.700 closes at 109.386."""
    a = np.array([(109.7, 109.75, 109.65, 109.7), (109.7, 109.72, 109.3, 109.386), (109.386,) * 4])
    index = pd.date_range("2024-01-02", periods=len(a), freq="h", tz="UTC")
    data = {"open": a[:, 0], "high": a[:, 1], "low": a[:, 2], "close": a[:, 3], "spread": np.zeros(len(a))}
    return make_frame(data, index, CandleMeta("USDJPY", Timeframe.H1, 3))


def test_a_symbol_quoted_in_another_currency_than_the_deposit_is_refused_not_booked_as_deposit_money():
    """USDJPY's profit is in yen: 1 lot from 109.700 to 109.386 loses 31,400 JPY (about 286 USD), and its
    margin at 1:100 is 1,000 USD. On a USD account the backtest booked -31,400 "USD" and charged a margin of
    109,700 "USD" (every order of a 10,000 USD account refused): refused, naming the symbol and both
    currencies."""
    with pytest.raises(ValueError, match=r"USDJPY.*JPY.*USD"):
        Backtest(yen_bars(), _BuyThenClose, forward=None, account=AccountConfig(spread=0))


def test_a_yen_symbol_on_a_yen_account_books_yen():
    """The same trade on a JPY account: -31,400 JPY; its margin, 1 x 100,000 x 109.7 / 100 = 109,700 JPY
    (1,000 USD at 109.7), fits a deposit of 110,000 JPY and not one of 109,000."""
    account = AccountConfig(deposit=110_000.0, currency="JPY", spread=0)
    rep = Backtest(yen_bars(), _BuyThenClose, forward=None, account=account).run()
    assert rep.trades["profit"].tolist() == pytest.approx([-31_400.0])
    short = AccountConfig(deposit=109_000.0, currency="JPY", spread=0)
    assert [
        r["retcode"] for r in Backtest(yen_bars(), _BuyThenClose, forward=None, account=short).run().rejected
    ] == [10019]


def test_paper_trading_a_yen_symbol_on_a_usd_account_is_refused_too():
    """Paper trading books money with the backtest's broker: the same refusal before the first bar."""
    from neuronet.live.paper import PaperBroker

    with pytest.raises(ValueError, match=r"USDJPY.*JPY.*USD"):
        PaperBroker(yen_bars(), 0.001, AccountConfig())


# -- money booked in cents ----------------------------------------------------------------------------------
def test_every_deal_books_its_money_in_whole_cents():
    """Netting: 0.1 lot bought at 1.10000 and 0.2 lot at 1.10001 average 1.1000066..., closed 0.1 lot at a
    time at 1.10010: each deal's profit, 9.333... points x 0.1 lot = 0.9333 USD, is booked as MetaTrader
    books a deal's money, in the deposit currency's cents: 0.93 (the balance held 10,001.8666... in
    between). A commission of 0.35 per lot and deal charges 0.035 on 0.1 lot: 0.04 (half a cent rounds away
    from zero), 0.07 on 0.2 lot. Balance 10,000 + 3 x 0.93 - (0.04 + 0.07) - 3 x 0.04 = 10,002.56."""
    rows = [(1.1,) * 4, (1.10001,) * 4, (1.1001,) * 4, (1.1001,) * 4, (1.1001,) * 4]
    b = broker(rows, commission=0.35)
    b.bar_open(0)
    b.order(+1, 0.1, None, None, 0, "")
    b.bar_range(0)
    b.bar_open(1)
    b.order(+1, 0.2, None, None, 0, "")
    b.bar_range(1)
    for t in (2, 3):
        b.bar_open(t)
        b.requests.close(b.positions()[0].ticket, None, 0.1)
        b.bar_range(t)
    b.finish(4)
    trades, deals = b.trades_frame(), b.ledger.deals_frame()
    assert trades["profit"].tolist() == [0.93, 0.93, 0.93]
    assert deals["commission"].tolist() == [-0.04, -0.07, -0.04, -0.04, -0.04]
    assert trades["commission"].sum() == pytest.approx(-0.23)
    assert b.balance == pytest.approx(10_002.56, abs=1e-9)


def test_a_swap_is_booked_in_whole_cents():
    """-0.35 points a night on 0.1 lot is -0.035 USD: -0.04 for the Monday night."""
    b = broker([(1.1,) * 4] * 26, swap_long=-0.35)
    b.bar_open(0)
    b.order(+1, 0.1, None, None, 0, "")
    b.bar_range(0)
    for t in range(1, 26):
        b.bar_open(t)
        b.bar_range(t)
    b.finish(25)
    assert b.trades_frame()["swap"].tolist() == [-0.04]
    assert b.balance == pytest.approx(9_999.96, abs=1e-9)


# -- a take-profit met on the way to the stop-out ------------------------------------------------------------
def test_a_take_profit_met_before_the_stop_out_price_fills_first_and_the_level_is_checked_after_it():
    """Hedging, 1:1000, hedged volume holding no margin, deposit 300: long 2 lots and short 1 lot (TP
    1.09800) at 1.10000 hold 110 of margin. The bid falls from 1.10000 to 1.09000. At 1.09800 the short's TP
    comes first (+200, balance 500); the long alone then floats -400 (equity 100) against 220 of margin,
    45 %: stopped out there (-400). Balance 100. The stop-out price was computed with the short still open
    (300 + (bid - 1.10000) x 100,000 <= 55 at 1.09755) and both were stopped out there: balance 55, the TP
    never filled."""
    rows = [(1.1, 1.1, 1.1, 1.1), (1.1, 1.1, 1.09, 1.09)]
    b = broker(rows, deposit=300.0, leverage=1000.0, hedging=True, margin_hedged=0.0)
    b.bar_open(0)
    b.order(+1, 2.0, None, None, 0, "")
    b.order(-1, 1.0, None, 1.098, 0, "")
    b.bar_range(0)
    b.bar_open(1)
    b.bar_range(1)
    trades = b.trades_frame()
    assert trades[["type", "exit_price", "exit_reason"]].values.tolist() == [
        ["sell", 1.098, "tp"],
        ["buy", 1.098, "stop out"],
    ]
    assert trades["profit"].tolist() == pytest.approx([200.0, -400.0])
    assert b.balance == pytest.approx(100.0)
