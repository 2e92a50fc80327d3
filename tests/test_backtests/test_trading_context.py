"""One trading context for one symbol or several (``backtests.context``), and what the multi-symbol bar
keeps between its questions: the account's stop-out screen (``Account.ruled_out``, worked out once per bar
and state of the account), the positions indexed by ticket, and the views' steps computed once a run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker.account import Account
from backtests.broker.calm import Calm
from backtests.broker.portfolio import open_brokers
from backtests.broker.screen import AccountScreen
from backtests.context import TradingContext
from datafeeds.clock import UTC
from datafeeds.symbols import BUILTIN
from datafeeds.synthetic import synthetic_candles
from strategies.base import ExpertAdvisor
from strategies.errors import EAError, EARuntimeError

TIME = pd.date_range("2024-01-02", periods=3, freq="h", tz="UTC")


def _bars(opens, lows=None):
    """Bars opening (and closing, and topping) at ``opens``, reaching down to ``lows``, no spread."""
    o = np.asarray(opens, dtype=float)
    lo = o if lows is None else np.asarray(lows, dtype=float)
    return (o, o, lo, o, np.zeros(len(o)), TIME[: len(o)])


def _brokers(columns, account):
    return open_brokers(columns, {s: BUILTIN[s] for s in columns}, account, UTC)


def _enter(brokers, t):
    for b in brokers.values():
        b.enter(t)


def test_the_stop_out_screen_is_worked_out_again_when_another_symbol_opens_in_the_same_bar():
    """The screen is kept for the bar while the account stands; a position another symbol opens after it
    was asked changes the account, and the next question of the same bar must see it."""
    account = AccountConfig(deposit=1_000.0, spread=0)
    brokers = _brokers(
        {
            "EURUSD": _bars([1.10000, 1.10000], lows=[1.05000, 1.10000]),  # bar 0 dips 500 points
            "GBPUSD": _bars([1.25000, 1.25000]),
        },
        account,
    )
    funds = brokers["EURUSD"].funds
    _enter(brokers, 0)
    assert brokers["GBPUSD"].order(+1, 0.01, None, None, 0, "")
    assert funds.ruled_out(0)  # GBPUSD does not move: nothing can stop the account out
    assert brokers["EURUSD"].order(+1, 0.5, None, None, 0, "")  # margin 550 of the 1,000
    # At bar 0's low EURUSD loses 0.05 x 50,000 = 2,500: the stop-out is no longer ruled out.
    assert not funds.ruled_out(0)
    brokers["EURUSD"].close(None, None)
    assert funds.ruled_out(0)  # closed again (at the open: no loss), the account is as safe as before


def test_the_stop_out_screen_follows_the_balance_within_a_bar():
    account = AccountConfig(deposit=1_000.0, spread=0)
    brokers = _brokers(
        {"EURUSD": _bars([1.10000], lows=[1.09000]), "GBPUSD": _bars([1.25000], lows=[1.23000])}, account
    )
    funds = brokers["EURUSD"].funds
    _enter(brokers, 0)
    assert brokers["EURUSD"].order(+1, 0.8, None, None, 0, "")  # margin 880; at the low -800
    assert not funds.ruled_out(0)
    funds.charge(5_000.0, 0)  # a deposit's worth of profit booked elsewhere in the bar
    assert funds.ruled_out(0)


def test_the_book_finds_a_position_by_ticket_until_it_is_closed():
    account = AccountConfig(deposit=10_000.0, spread=0, hedging=True)
    brokers = _brokers({"EURUSD": _bars([1.10000]), "GBPUSD": _bars([1.25000])}, account)
    _enter(brokers, 0)
    ctx = TradingContext(brokers, "EURUSD")
    first = ctx.order(+1, 0.1, None, None, 0, "", symbol="GBPUSD")
    second = ctx.order(-1, 0.2, None, None, 0, "", symbol="GBPUSD")
    book = brokers["GBPUSD"].book
    assert book.position(first).lots == 0.1 and book.position(second).lots == 0.2
    assert brokers["EURUSD"].book.position(first) is None
    # A ticket without a symbol reaches the symbol that holds it: modified, partly closed, closed.
    assert ctx.modify(second, 1.26000, None) and book.position(second).sl == 126_000
    assert ctx.close(second, None, lots=0.05) == 1 and book.position(second).lots == 0.15
    assert ctx.close(first, None) == 1
    assert book.position(first) is None and [p.ticket for p in ctx.positions()] == [second]
    # A closed ticket is unknown to every symbol: the main symbol refuses it, as the terminal does.
    assert not ctx.modify(first, 1.20000, None) and ctx.last_retcode != 0


class _Buys(ExpertAdvisor):
    """Buys ``name`` once, at the third bar."""

    name: str = ""

    def on_bar(self) -> None:
        if len(self.bars) == 3:
            self.buy(0.1, symbol=self.name or None)


@pytest.mark.parametrize("several", [False, True])
def test_one_symbol_and_several_route_symbol_the_same_way(several):
    """``symbol=`` is one rule for both: the main chart's name and None reach the same broker, another
    symbol is one clear error naming the run's symbols."""
    frames = {"EURUSD": synthetic_candles("EURUSD", "H1", 40, seed=1)}
    if several:
        frames["GBPUSD"] = synthetic_candles("GBPUSD", "H1", 40, seed=2)
    symbols = tuple(frames)
    ea = type("Buys", (_Buys,), {"symbols": symbols})
    data = frames if several else frames["EURUSD"]
    runs = [Backtest(data, ea, forward=None).run(name=name) for name in ("", "EURUSD")]
    assert len(runs[0].trades) == len(runs[1].trades) == 1
    pd.testing.assert_frame_equal(runs[0].deals, runs[1].deals)
    with pytest.raises(EARuntimeError) as caught:
        Backtest(data, ea, forward=None).run(name="XAUUSD")
    cause = caught.value.__cause__
    assert isinstance(cause, EAError)
    assert f"symbol 'XAUUSD': this run trades {', '.join(symbols)} only" in str(cause)


class _Counts(ExpertAdvisor):
    """Retrains every few bars and records, at each decision, how many H4 bars of each symbol it sees."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "H4")
    retrain_every = 7

    def on_init(self) -> None:
        self.seen: list[tuple[pd.Timestamp, int, int]] = []
        self.studies = 0

    def on_study(self, bars) -> None:
        self.studies += 1

    def on_bar(self) -> None:
        self.seen.append((self.time_current, len(self.data("EURUSD", "H4")), len(self.data("GBPUSD", "H4"))))


def test_views_stepped_once_a_run_show_every_bar_closed_by_each_decision_across_retrainings():
    """The views' steps are computed once for the run; a retraining reveals the same bars at its bar, and
    every decision sees exactly the H4 bars that have closed by then."""
    frames = {s: synthetic_candles(s, "H1", 200, seed=i + 1) for i, s in enumerate(_Counts.symbols)}
    result = Backtest(frames, _Counts, forward="1/2").run()
    ea = result.ea_instance
    assert ea.studies > 5 and len(ea.seen) == 100
    for now, eurusd, gbpusd in ea.seen:
        opens = frames["EURUSD"].index.floor("4h").unique()
        closed = int(np.sum(opens + pd.Timedelta(hours=4) <= now))
        assert eurusd == gbpusd == closed, now


class _Spellings(ExpertAdvisor):
    """Asks its views under every spelling, and for what it did not declare, on every bar."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "H4")
    BAD = (("XAUUSD", None), ("EURUSD", "D1"), (["EURUSD"], None), ("EURUSD", ["H1"]), ({"a": 1}, "H1"))

    def on_init(self) -> None:
        self.seen: list[tuple[pd.Timestamp, int, int]] = []
        self.refused = 0

    def on_bar(self) -> None:
        main = self.data()
        for same in (self.data("EURUSD"), self.data("EURUSD", "h1"), self.data(None, " H1 "), self.bars):
            assert same is main  # one live view, whichever way it is asked
        self.seen.append((self.time_current, len(main), len(self.data("GBPUSD", "h4"))))
        for symbol, timeframe in self.BAD:
            try:
                self.data(symbol, timeframe)
            except EAError as exc:
                assert "not declared" in str(exc)
                self.refused += 1


def test_views_asked_again_are_the_same_live_views_and_what_is_not_declared_is_refused_every_time():
    """The views' answers kept by the arguments an EA gives stay live (each decision sees the bars closed
    by then, never a copy of an earlier bar's), and a symbol or timeframe the EA did not declare, or an
    argument of the wrong type, is refused with the same line on every bar, never kept."""
    frames = {s: synthetic_candles(s, "H1", 120, seed=i + 1) for i, s in enumerate(_Spellings.symbols)}
    ea = Backtest(frames, _Spellings, forward="1/2").run().ea_instance
    assert len(ea.seen) == 60 and ea.refused == 60 * len(_Spellings.BAD)
    opens = frames["EURUSD"].index
    for now, h1, h4 in ea.seen:
        assert h1 == int(np.sum(opens + pd.Timedelta(hours=1) <= now)), now
        assert h4 == int(np.sum(opens.floor("4h").unique() + pd.Timedelta(hours=4) <= now)), now


def test_the_free_margin_screen_never_admits_a_deal_the_exact_sum_refuses():
    """Near the edge and far from it, on random bars and positions: wherever ``AccountScreen.clear_of``
    says the equity covers a need, the exact sum (every position at the prices now) says so too; and it
    does say so where the room is plain, so the screen is used."""
    rng = np.random.default_rng(7)
    account = AccountConfig(deposit=2_000.0, leverage=100.0, hedging=True)
    names = ("EURUSD", "GBPUSD", "AUDUSD")
    used = 0
    for _ in range(60):
        columns = {}
        for name, price in zip(names, (1.1, 1.25, 0.65), strict=True):
            o = np.round(price + rng.normal(0, 0.002, 2), 5)
            h = np.round(o + rng.uniform(0, 0.004, 2), 5)
            lo = np.round(o - rng.uniform(0, 0.004, 2), 5)
            spread = rng.integers(0, 30, 2).astype(float)
            columns[name] = (o, h, lo, o, spread, TIME[:2])
        brokers = _brokers(columns, account)
        _enter(brokers, 0)
        for name in names[1:]:
            for _ in range(int(rng.integers(1, 3))):
                side, lots = int(rng.choice([-1, 1])), float(rng.integers(1, 6)) / 10
                brokers[name].order(side, lots, None, None, 0, "")
        _enter(brokers, 1)  # the positions are now valued at bar 1's open, somewhere in its range
        desk = brokers["EURUSD"]
        funds = desk.funds
        bid, ask = desk.price_points(-1), desk.price_points(+1)
        exact = funds.equity(bid, ask, desk)
        for need in exact + np.array([-300.0, -20.0, -1.0, -1e-6, 0.0, 1e-6, 5.0]):
            if funds.screen.clear_of(desk, bid, ask, float(need)):
                used += 1
                assert exact - need >= -1e-9, (exact, need)
    assert used > 30


class _Crowds(ExpertAdvisor):
    """Asks each symbol for more than the free margin holds, now and then: many deals refused (10019)."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    seed: int = 0

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_bar(self) -> None:
        for s in self.symbols:
            r = self.rng.random()
            if r < 0.05:
                self.close(symbol=s)
            elif r < 0.25:
                lots = float(self.rng.integers(1, 12)) / 10
                (self.buy if self.rng.random() < 0.5 else self.sell)(lots, symbol=s, sl_points=400.0)


@pytest.mark.parametrize("hedging", [False, True])
def test_a_run_with_the_free_margin_screen_equals_one_valuing_every_position(monkeypatch, hedging):
    frames = {s: synthetic_candles(s, "H1", 600, seed=i + 5) for i, s in enumerate(_Crowds.symbols)}
    account = AccountConfig(deposit=3_000.0, leverage=100.0, hedging=hedging)
    screened = Backtest(frames, _Crowds, forward=None, account=account).run()
    monkeypatch.setattr(AccountScreen, "clear_of", lambda self, desk, bid, ask, need: False)
    exact = Backtest(frames, _Crowds, forward=None, account=account).run()
    assert any(r["retcode"] == 10019 for r in exact.rejected)  # the margin is reached, and refused
    for name in ("orders", "deals", "trades"):
        pd.testing.assert_frame_equal(getattr(screened, name), getattr(exact, name))
    assert screened.rejected == exact.rejected
    np.testing.assert_array_equal(np.asarray(screened.equity), np.asarray(exact.equity))


class _HeavyDollars(ExpertAdvisor):
    """Holds a lot of each dollar-quoted symbol (profit in the deposit currency, so the stop-out screen
    tries whole blocks of bars), reopened whenever closed, on a deposit that barely carries them."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")
    side = 1
    lots = 1.0

    def on_bar(self):
        for s in self.symbols:
            if not self.position_of(s):
                (self.buy if self.side > 0 else self.sell)(
                    self.lots, symbol=s, sl_points=2500, tp_points=2500
                )


@pytest.mark.parametrize(("side", "lots", "deposit"), [(1, 1.0, 4_000.0), (-1, 1.0, 4_000.0), (1, 0.2, 5e4)])
def test_block_screened_stop_outs_of_dollar_symbols_equal_every_bar_checked(side, lots, deposit, monkeypatch):
    """The block screen (every symbol at the worst of 64 bars) rules out only what every check would: the
    same deals and curves as a run checking every bar of every symbol in full, stop-outs included."""
    frames = {s: synthetic_candles(s, "H1", 2000, seed=i + 3) for i, s in enumerate(_HeavyDollars.symbols)}
    bt = Backtest(frames, _HeavyDollars, account=AccountConfig(deposit=deposit), forward=None)
    screened = bt.run(side=side, lots=lots)
    blocks = []
    original = AccountScreen._block_clear
    monkeypatch.setattr(AccountScreen, "_block_clear", lambda self, t: blocks.append(t) or original(self, t))
    assert bt.run(side=side, lots=lots).deals.equals(screened.deals)
    assert blocks  # the block screen was asked
    monkeypatch.setattr(Calm, "holds", lambda self, t: False)
    monkeypatch.setattr(Account, "ruled_out", lambda self, t: False)
    checked = bt.run(side=side, lots=lots)
    if deposit < 1e4:
        assert "stop out" in set(checked.trades["exit_reason"])
    for name in ("orders", "deals", "trades"):
        pd.testing.assert_frame_equal(getattr(screened, name), getattr(checked, name), check_exact=True)
    np.testing.assert_array_equal(np.asarray(screened.equity), np.asarray(checked.equity))
    np.testing.assert_array_equal(np.asarray(screened.balance), np.asarray(checked.balance))
