"""The open-prices screen of quiet bars (``backtests.broker.calm``) skips only checks that would do nothing.

Every run here is made twice, with the screen and with every bar checked (``Calm.holds`` always False), and
must give the same orders, deals, trades and balance: stop-losses, take-profits, stops moved inside a bar's
reach, swaps that bring the stop-out nearer, stop-outs of longs, shorts and hedged mixes.
"""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker import Broker
from backtests.broker.calm import Calm, Span
from datafeeds import meta_of, read_sample
from datafeeds.candles import make_frame
from neuronet.live.paper import PaperBroker
from strategies.base import ExpertAdvisor


class RandomStopsEA(ExpertAdvisor):
    """Opens, closes and re-stops positions at random, with stops at random distances."""

    seed: int = 0
    lots: float = 0.8

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_bar(self) -> None:
        r = self.rng.random()
        if r < 0.02:
            self.close()
        elif r < 0.08:
            side = self.buy if self.rng.random() < 0.5 else self.sell
            sl = float(self.rng.integers(30, 900)) if self.rng.random() < 0.7 else None
            tp = float(self.rng.integers(20, 300)) if self.rng.random() < 0.7 else None
            side(self.lots, sl_points=sl, tp_points=tp)
        elif r < 0.16 and self.positions():
            pos = self.positions()[0]
            near = float(self.rng.integers(5, 200)) * self.point
            level = self.bid - near if pos.side > 0 else self.ask + near
            self.modify(pos.ticket, sl=level)


def _unscreened(monkeypatch) -> None:
    monkeypatch.setattr(Calm, "holds", lambda self, t: False)


def _figures(result) -> dict:
    return {
        "trades": result.trades,
        "deals": result.deals,
        "orders": result.orders,
        "rejected": pd.DataFrame(result.rejected),
        "balance": pd.DataFrame(np.asarray(result.balance)),
        "equity": pd.DataFrame(np.asarray(result.equity)),
    }


def _same(a: dict, b: dict) -> None:
    for name, frame in a.items():
        pd.testing.assert_frame_equal(frame, b[name], check_exact=True, obj=name)


ACCOUNTS = {
    "netting": AccountConfig(deposit=1_000.0),
    "hedging": AccountConfig(deposit=1_000.0, hedging=True),
    "swaps": AccountConfig(deposit=1_000.0, hedging=True, swap_long=-40.0, swap_short=-35.0),
    "no_stop_out": AccountConfig(deposit=1_000.0, stop_out_level=0.0),
}


ACCOUNT = AccountConfig(deposit=1_000.0, hedging=True, leverage=1000.0)


@pytest.mark.parametrize("name", ACCOUNTS)
@pytest.mark.parametrize("seed", [1, 2])
def test_quiet_bars_skip_nothing_a_check_would_act_on(name, seed, monkeypatch):
    df = read_sample()
    bt = Backtest(df, RandomStopsEA, account=ACCOUNTS[name], forward=None)
    screened = bt.run(seed=seed)
    _unscreened(monkeypatch)
    checked = bt.run(seed=seed)
    reasons = set(checked.trades["exit_reason"])
    assert {"sl", "tp"} <= reasons  # the runs reach stops, so the screen had something to miss
    _same(_figures(screened), _figures(checked))


def test_shorts_and_longs_alone_and_hedged_are_each_stopped_out_where_every_bar_is_checked(monkeypatch):
    """The stop-out bound of each form (``Account.calm_bounds``): longs only, shorts only, and a hedged mix
    whose shorts are valued at the widest spread."""

    class Hold(ExpertAdvisor):
        sides: str = "+"

        def on_bar(self) -> None:
            if not self.positions():
                for s in self.sides:
                    (self.buy if s == "+" else self.sell)(4.0 if s == self.sides[0] else 1.3)

    df = read_sample()
    runs: dict[str, dict] = {}
    for sides in ("+", "-", "+-", "-+"):
        bt = Backtest(df, Hold, account=ACCOUNT, forward=None)
        runs[sides] = _figures(bt.run(sides=sides))
    _unscreened(monkeypatch)
    for sides, screened in runs.items():
        bt = Backtest(df, Hold, account=ACCOUNT, forward=None)
        checked = bt.run(sides=sides)
        assert "stop out" in set(checked.trades["exit_reason"]), sides
        _same(screened, _figures(checked))


def test_calm_bounds_lie_beyond_the_stop_out_price():
    """Longs alone: every bid above the bound keeps the margin level above the stop-out; the price where
    the level is reached lies at or below the bound."""
    df = read_sample().iloc[:50]
    cols = (df[c].to_numpy() for c in ("open", "high", "low", "close", "spread"))
    b = Broker(*cols, df.index, 1e-5, AccountConfig(deposit=1_000.0))
    b.bar_open(10)
    b.order(+1, 0.8, None, None, 0, "")
    low, high, ask_high = b.funds.calm_bounds(b.market.extremes().widest)
    assert high == ask_high == np.inf
    crossing = b.funds.stop_out_price(0.0)
    assert crossing <= low < crossing + 2
    above = float(np.ceil(low)) if np.ceil(low) > low else low + 1
    assert not b.funds.level_crossed((above, above, above, 0.0), False, b)
    assert b.funds.level_crossed((np.floor(crossing),) * 3 + (0.0,), False, b)


def test_a_paper_bar_completed_after_its_open_reaches_the_stop():
    """A paper bar opens flat (high = low = open) and gets its range at its close: the screen made at its
    open must not keep the stop-loss its range reaches from being checked."""
    df = read_sample().iloc[:60]
    point = 1e-5
    paper = PaperBroker(df.iloc[:50], point, AccountConfig(spread=10))
    t = paper.open_bar(df.index[50], 1.10000, 1.10010)
    paper.order(+1, 1.0, 1.09900, None, 0, "")
    paper.close_bar(t, 1.10050, 1.09950, 1.10000)  # nothing reached
    t = paper.open_bar(df.index[51], 1.10000, 1.10010)  # quiet at its open: high = low = open
    assert not paper.trades
    paper.close_bar(t, 1.10020, 1.09850, 1.09900)  # its low passes the stop-loss
    assert [(tr.exit_reason, tr.exit_price) for tr in paper.trades] == [("sl", 1.099)]


def test_a_replay_leaves_the_collector_as_it_found_it():
    """The replay freezes the heap of before it only while it runs, and never undoes a caller's freeze."""
    df = read_sample().iloc[:300]
    bt = Backtest(df, RandomStopsEA, account=AccountConfig(deposit=1_000.0), forward=None)
    assert gc.get_freeze_count() == 0
    bt.run()
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        bt.run()
        assert gc.get_freeze_count() > frozen // 2  # still the caller's (less what was freed meanwhile)
    finally:
        gc.unfreeze()


def test_the_collector_thresholds_are_raised_only_while_a_replay_runs():
    """The youngest generation is collected less often during the bar loop, and the caller's thresholds
    come back after it, also when the EA fails."""
    seen: list[tuple[int, int, int]] = []

    class Watch(ExpertAdvisor):
        fail: bool = False

        def on_bar(self) -> None:
            seen.append(gc.get_threshold())
            if self.fail and len(self.bars) > 10:
                raise RuntimeError("the EA's own bug")

    before = gc.get_threshold()
    bt = Backtest(read_sample().iloc[:50], Watch, forward=None)
    bt.run()
    assert gc.get_threshold() == before
    assert seen and all(t[0] > before[0] and t[1:] == before[1:] for t in seen)
    with pytest.raises(Exception, match="the EA's own bug"):
        bt.run(fail=True)
    assert gc.get_threshold() == before
    seen.clear()
    gc.set_threshold(0, *before[1:])  # automatic collection off: left off
    try:
        bt.run()
    finally:
        gc.set_threshold(*before)
    assert seen and all(t[0] == 0 for t in seen)


def _falls_at(fall: int, n: int = 700, to: float = 1.09000) -> pd.DataFrame:
    """Flat H1 bars at 1.10000 (range 20 points, spread 10) whose bar ``fall`` reaches down to ``to``."""
    index = pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC")
    low = np.full(n, 1.09990)
    low[fall] = to
    flat = np.full(n, 1.10000)
    columns = {"open": flat, "high": flat + 0.0001, "low": low, "close": flat, "spread": np.full(n, 10.0)}
    return make_frame(columns, index, meta_of(read_sample()))


class LongWithStopEA(ExpertAdvisor):
    """One long from bar ``entry`` with a stop-loss 500 points below the bid."""

    entry: int = 5

    def on_bar(self) -> None:
        if len(self.bars) >= self.entry and not self.positions() and not len(self.history):
            self.buy(1.0, sl_points=500)
            self.history.append(1)

    def on_init(self) -> None:
        self.history: list[int] = []


@pytest.mark.parametrize("fall", [6, 63, 64, 65, 500, 699])
def test_a_stop_reached_once_after_long_quiet_is_met_at_its_bar(fall, monkeypatch):
    """The screen rules out the bars left at once only where none of them reaches a level: a single bar
    that falls to a long's stop-loss, early, at a step's edge or at the last bar, closes it there."""
    df = _falls_at(fall)
    bt = Backtest(df, LongWithStopEA, account=AccountConfig(deposit=1e6), forward=None)
    screened = bt.run()
    assert list(screened.trades["exit_reason"]) == ["sl"]
    assert list(screened.trades["exit_bar"]) == [fall]
    _unscreened(monkeypatch)
    _same(_figures(screened), _figures(bt.run()))


def test_a_stop_touched_exactly_once_after_long_quiet_is_met_at_its_level(monkeypatch):
    """The stop-loss lies at 1.10010 - 500 points = 1.09510 and one bar's low is exactly that: a touch."""
    df = _falls_at(300, to=1.09510)
    bt = Backtest(df, LongWithStopEA, account=AccountConfig(deposit=1e6), forward=None)
    screened = bt.run()
    assert [(r.exit_reason, r.exit_bar, r.exit_price) for r in screened.trades.itertuples()] == [
        ("sl", 300, 1.09510)
    ]
    _unscreened(monkeypatch)
    _same(_figures(screened), _figures(bt.run()))


def test_a_stop_beyond_every_later_price_rules_out_the_rest_at_once(monkeypatch):
    """No bar after the entry reaches the stop: the screen looks at no block of bars one by one (the bars
    are ruled out in steps of ``TAIL``, so the fall lies a step before the entry)."""
    searched = []
    search = Calm._screen
    monkeypatch.setattr(Calm, "_screen", lambda self, t: searched.append(t) or search(self, t))
    df = _falls_at(2)  # the fall comes before the entry
    result = Backtest(df, LongWithStopEA, account=AccountConfig(deposit=1e6), forward=None).run(entry=70)
    assert list(result.trades["exit_reason"]) == ["end of test"]
    assert searched == []


class HoldLongEA(ExpertAdvisor):
    """Buys once and holds, without stops: on a deep account every later bar is quiet."""

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(1.0)


def test_a_quiet_span_ends_at_each_rollover_so_every_night_books_its_swap(monkeypatch):
    """The replay passes quiet bars without the broker's bar events (``Calm.span``), but a span never
    crosses a server midnight: the rollover's bar opens with its swap, as where every bar is checked."""
    opened = []
    bar_open = Broker.bar_open
    monkeypatch.setattr(Broker, "bar_open", lambda self, t: opened.append(t) or bar_open(self, t))
    df = read_sample().iloc[:600]
    account = AccountConfig(deposit=1e6, swap_long=-40.0, swap_short=-35.0)
    bt = Backtest(df, HoldLongEA, account=account, forward=None)
    screened = bt.run()
    days = set(df.index.normalize())  # the sample's server clock is UTC
    assert len(opened) < len(df) / 4  # the span was used: most bars were passed without their events
    assert len(days) >= 20 and set(df.index[opened].normalize()) == days  # yet every day had its open
    swap = float(screened.trades["swap"].sum())
    assert swap < 0
    _unscreened(monkeypatch)
    monkeypatch.setattr(Calm, "span", lambda self, t: Span(t, self.state()))
    checked = bt.run()
    _same(_figures(screened), _figures(checked))
    assert float(checked.trades["swap"].sum()) == swap


def test_a_quiet_span_ends_at_the_server_midnight_of_a_shifted_clock(monkeypatch):
    """On a UTC+2 server with US daylight saving the rollover comes at 22:00 or 21:00 UTC: each span ends
    there, and the swaps equal those of a run where every bar is checked."""
    from dataclasses import replace

    from datafeeds.clock import BrokerClock

    df = read_sample().iloc[:900].copy()
    df.attrs = {"candles": replace(df.attrs["candles"], clock=BrokerClock(2.0, "us"))}
    account = AccountConfig(deposit=1e6, swap_long=-40.0, swap_short=-35.0)
    bt = Backtest(df, HoldLongEA, account=account, forward=None)
    screened = bt.run()
    assert float(screened.trades["swap"].sum()) < 0
    _unscreened(monkeypatch)
    monkeypatch.setattr(Calm, "span", lambda self, t: Span(t, self.state()))
    _same(_figures(screened), _figures(bt.run()))


def test_a_flat_account_passes_its_bars_without_their_events_and_trades_when_asked(monkeypatch):
    """With nothing open the span runs to the last bar, but an order placed in it ends it at once: the
    position's stop is checked from its first bar on."""

    class LateEntryEA(ExpertAdvisor):
        def on_bar(self) -> None:
            if len(self.bars) == 300 and not self.positions():
                self.buy(1.0, sl_points=150)

    df = read_sample().iloc[:1200]
    bt = Backtest(df, LateEntryEA, account=AccountConfig(deposit=1e6), forward=None)
    screened = bt.run()
    assert list(screened.trades["exit_reason"])[:1] == ["sl"]
    _unscreened(monkeypatch)
    monkeypatch.setattr(Calm, "span", lambda self, t: Span(t, self.state()))
    _same(_figures(screened), _figures(bt.run()))


class StudyTraderEA(ExpertAdvisor):
    """Trades only when it retrains: a position with a near stop opened by ``on_study`` inside a quiet
    span (nothing else happens between the bars, so only the retraining can change the book)."""

    retrain_every: int = 37

    def on_study(self, bars) -> None:
        if not self.positions():
            self.buy(1.0, sl_points=60, tp_points=90)


def test_a_position_opened_by_a_retraining_ends_the_quiet_span_at_once(monkeypatch):
    df = read_sample().iloc[:1500]
    bt = Backtest(df, StudyTraderEA, account=AccountConfig(deposit=1e6), forward=0.5)
    screened = bt.run()
    assert {"sl", "tp"} <= set(screened.trades["exit_reason"])
    _unscreened(monkeypatch)
    monkeypatch.setattr(Calm, "span", lambda self, t: Span(t, self.state()))
    _same(_figures(screened), _figures(bt.run()))


class RandomStudyAndBarEA(ExpertAdvisor):
    """Acts at random in ``on_study`` and, rarely, in ``on_bar``: market orders with stops, pending orders
    of every kind with and without an expiration, closes by magic and of everything, stops moved near the
    market, cancellations; long quiet spans between them."""

    seed: int = 0
    rate: float = 0.03
    retrain_every: int = 7

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_study(self, bars) -> None:
        if self.rng.random() < 0.7:
            self._act()

    def on_bar(self) -> None:
        if self.rng.random() < self.rate:
            self._act()

    def _act(self) -> None:
        r, bid, ask, pt = self.rng, self.bid, self.ask, self.point
        x = r.random()
        if x < 0.35:
            side = self.buy if r.random() < 0.5 else self.sell
            sl = float(r.integers(50, 1500)) if r.random() < 0.6 else None
            tp = float(r.integers(50, 1500)) if r.random() < 0.6 else None
            lots = float(r.choice([0.1, 0.5, 1.0, 2.0]))
            side(lots, sl_points=sl, tp_points=tp, magic=int(r.integers(1, 3)))
        elif x < 0.6:
            kind, away = int(r.integers(0, 4)), float(r.integers(20, 900)) * pt
            kw = {"magic": int(r.integers(1, 3))}
            if r.random() < 0.5:
                kw["expiration"] = self.time_current + pd.Timedelta(minutes=int(r.integers(5, 3000)))
            price = (ask - away, bid + away, ask + away, bid - away)[kind]
            (self.buy_limit, self.sell_limit, self.buy_stop, self.sell_stop)[kind](0.5, round(price, 5), **kw)
        elif x < 0.7:
            self.close(magic=int(r.integers(1, 3)))
        elif x < 0.73:
            self.close()
        elif x < 0.93 and self.positions():
            pos = self.positions()[int(r.integers(0, len(self.positions())))]
            near = float(r.integers(5, 400)) * pt
            if r.random() < 0.5:
                self.modify(pos.ticket, sl=round(bid - near if pos.side > 0 else ask + near, 5))
            else:
                self.modify(pos.ticket, tp=round(bid + near if pos.side > 0 else ask - near, 5))
        elif self.orders():
            self.cancel(self.orders()[0].ticket)


@pytest.mark.parametrize(
    "account",
    [
        AccountConfig(deposit=600.0, leverage=200.0, hedging=True, swap_long=-60.0, swap_short=-45.0),
        AccountConfig(
            deposit=800.0,
            leverage=200.0,
            commission=7.0,
            stops_level=20,
            freeze_level=10,
            swap_long=-60.0,
            swap_short=-45.0,
        ),
    ],
    ids=["hedging-swaps", "netting-commission-levels"],
)
def test_trades_made_in_retrainings_and_rare_bars_equal_a_run_that_checks_every_bar(account, monkeypatch):
    """Between two retrainings (every 7 bars) the book changes only there or in a rare ``on_bar``: pending
    orders placed, expiring and filled, stops moved, swaps and stop-outs, over the sample's weekends. Every
    figure equals that of a run where every bar's events run (no quiet bar, no quiet span)."""
    df = read_sample()
    bt = Backtest(df, RandomStudyAndBarEA, account=account, forward=None, walk_forward=(300, 7))
    screened = [bt.run(seed=seed) for seed in (1, 2, 3)]
    _unscreened(monkeypatch)
    monkeypatch.setattr(Calm, "span", lambda self, t: Span(t, self.state()))
    checked = [bt.run(seed=seed) for seed in (1, 2, 3)]
    reasons = set().union(*(set(r.trades["exit_reason"]) for r in checked))
    assert {"sl", "tp", "stop out"} <= reasons
    assert any((r.orders["state"] == "expired").any() for r in checked)
    for a, b in zip(screened, checked, strict=True):
        _same(_figures(a), _figures(b))


@pytest.mark.parametrize(
    "case", ["inside", "open below the low", "open above the high", "spreads of the open"]
)
def test_each_bars_extremes_are_the_lowest_and_highest_of_its_open_and_range_in_every_case(case):
    # The screen's bounds per bar, bid and ask: where the range holds the open they are the range itself,
    # read without a copy; an open outside its bar's range (candles that carry one) or an opening spread
    # of its own (finer data) still bounds the bar.
    rng = np.random.default_rng(7)
    n = 300
    o = 110_000.0 + np.cumsum(rng.integers(-20, 21, n)).astype(float)
    h = o + rng.integers(0, 30, n)
    lo = o - rng.integers(0, 30, n)
    c = np.clip(o + rng.integers(-15, 16, n), lo, h)
    s = rng.integers(0, 12, n).astype(float)
    if case == "open below the low":
        lo[17] = o[17] + 3
    elif case == "open above the high":
        h[230] = o[230] - 4
    times = pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC")
    b = Broker(o / 1e5, h / 1e5, lo / 1e5, c / 1e5, s, times, 1e-5, AccountConfig(deposit=1_000.0))
    m = b.market
    s_open = s
    if case == "spreads of the open":
        s_open = s + rng.integers(0, 9, n)
        m.use_spreads(s_open, np.full(n, np.nan))
    ext = m.extremes()
    expected = (
        np.minimum(o, lo),
        np.maximum(o, h),
        np.minimum(o + s_open, lo + s),
        np.maximum(o + s_open, h + s),
    )
    for got, want in zip((ext.bid_low, ext.bid_high, ext.ask_low, ext.ask_high), expected, strict=True):
        np.testing.assert_array_equal(got, want, strict=True)
    assert ext.widest == max(s.max(), s_open.max())
