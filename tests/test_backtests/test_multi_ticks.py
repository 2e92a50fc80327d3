"""Several symbols' ticks worked in time order on one account ("Every tick based on real ticks"): each
symbol's figures as its own tick run gives them, the others read at their last tick at or before each
moment, never a later one, and the bad inputs refused in one line."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.errors import SymbolsError
from backtests.paths import ModelDataError
from datafeeds.synthetic import synthetic_candles
from datafeeds.synthetic_ticks import synthetic_ticks
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

T0 = pd.Timestamp("2024-01-02", tz="UTC")


class _Brackets(ExpertAdvisor):
    """Each symbol on its own: a market order with SL/TP after an up or down bar, and a buy stop with an
    expiry above the open while flat, so exits, fills and expiries happen on ticks inside the bars."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")
    lots = 0.1

    def on_bar(self):
        for s in self.symbols:
            bars = self.data(s)
            if len(bars) < 2 or self.position_of(s) or self.orders(s):
                continue
            point = 0.00001
            if len(bars) % 3 == 0:
                ask = self.ask_of(s)
                expires = bars.time[-1] + pd.Timedelta(minutes=100)  # 40 minutes into this bar
                self.buy_stop(self.lots, ask + 30 * point, sl=ask - 60 * point, tp=ask + 120 * point,
                              expiration=expires, symbol=s)  # fmt: skip
                continue
            up = bars.close[-1] > bars.close[-2]
            (self.buy if up else self.sell)(self.lots, symbol=s, sl_points=80, tp_points=100)


def _market(symbols, hours, ticks_per_minute=6.0, on_the_hour=False):
    """H1 candles built from synthetic ticks of each symbol (so they agree), and the ticks; ``on_the_hour``:
    every symbol's first tick of each hour moved to the hour itself, so all of them open a bar together."""
    frames, ticks = {}, {}
    for i, s in enumerate(symbols):
        m1 = synthetic_candles(s, "M1", hours * 60, seed=i + 1)
        own = synthetic_ticks(m1, seed=i + 11, ticks_per_minute=ticks_per_minute)
        if on_the_hour:
            hour = own.index.floor("h")
            first = np.r_[True, hour[1:] != hour[:-1]]
            own = make_ticks(
                np.where(first, hour.asi8, own.index.asi8), own["bid"].to_numpy(), own["ask"].to_numpy(),
                own.attrs["ticks"],
            )  # fmt: skip
        ticks[s] = own
        frames[s] = bars_from_ticks(ticks[s], "H1")
    return frames, ticks


def test_ticks_three_independent_symbols_equal_three_single_symbol_tick_runs():
    """With every symbol's bar opening at the same instant (a symbol whose first tick comes later stands at
    its last tick before the bar at the decision, as a single-symbol run never does)."""
    frames, ticks = _market(_Brackets.symbols, 240, on_the_hour=True)
    multi = Backtest(frames, _Brackets, model="ticks", ticks=ticks).run()
    cols = ["type", "lots", "entry_time", "entry_price", "exit_time", "exit_price", "exit_reason", "profit"]
    deposit = AccountConfig().deposit
    summed = np.full(len(multi.equity), deposit)
    orders = []
    for s in _Brackets.symbols:
        one = type(f"Brackets{s}", (_Brackets,), {"symbols": (s,)})
        single = Backtest(frames[s], one, model="ticks", ticks=ticks[s]).run()
        mine = multi.trades[multi.trades["symbol"] == s].reset_index(drop=True)
        assert len(mine) == len(single.trades) > 10
        assert set(mine["exit_reason"]) >= {"sl", "tp"}  # exits inside bars, found on the ticks
        pd.testing.assert_frame_equal(mine[cols], single.trades[cols].reset_index(drop=True))
        summed += single.equity["equity"].to_numpy() - deposit
        theirs = single.orders[["type", "state", "time_setup", "time_done"]].reset_index(drop=True)
        ours = multi.orders[multi.orders["symbol"] == s][theirs.columns].reset_index(drop=True)
        pd.testing.assert_frame_equal(ours, theirs)
        orders.append(ours)
    states = set(pd.concat(orders)["state"])
    assert {"filled", "expired"} <= states  # pending orders filled and expired on the ticks
    np.testing.assert_allclose(multi.equity["equity"].to_numpy(), summed, rtol=0, atol=1e-6)
    assert multi.data["model"] == "ticks"
    assert set(multi.data["tick_quality"]) == set(_Brackets.symbols)


def _hand_ticks(symbol: str, rows: list[tuple[float, float]]) -> pd.DataFrame:
    """Ticks of ``symbol`` at (seconds from ``T0``, bid), ask = bid (spread 0)."""
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


H = 3600
# GBPUSD falls 1500 points 10 s into the third hour and is back 30 s later; EURUSD falls 200 points at 20 s
# and rises 100 points above its open at 30 s.
# (The EA decides at the second bar's open; the third bar holds the moves, the fourth is flat.)
GBP = [
    (0, 1.3),
    (H, 1.3),
    (2 * H, 1.3),
    (2 * H + 10, 1.285),
    (2 * H + 40, 1.3),
    (3 * H, 1.3),
    (4 * H - 1, 1.3),
]
EUR = [
    (0, 1.1),
    (H, 1.1),
    (2 * H, 1.1),
    (2 * H + 20, 1.098),
    (2 * H + 30, 1.101),
    (3 * H, 1.101),
    (4 * H - 1, 1.101),
]


class _Both(ExpertAdvisor):
    """Opens 0.3 lot of GBPUSD and 0.5 lot of EURUSD at the second bar (or a buy stop of EURUSD)."""

    symbols = ("EURUSD", "GBPUSD")
    stop_lots = 0.0

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(0.3, symbol="GBPUSD")
            if self.stop_lots:
                self.buy_stop(self.stop_lots, 1.10100, symbol="EURUSD")
            else:
                self.buy(0.5, symbol="EURUSD")


def _two(deposit: float, eur=EUR, gbp=GBP, ea=_Both, **params):
    ticks = {"EURUSD": _hand_ticks("EURUSD", eur), "GBPUSD": _hand_ticks("GBPUSD", gbp)}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    account = AccountConfig(deposit=deposit, spread=0, leverage=100.0, stop_out_level=50.0)
    return Backtest(frames, ea, model="ticks", ticks=ticks, account=account, forward=None).run(**params)


def test_ticks_stop_out_sees_the_other_symbols_tick_of_that_moment_not_a_later_one():
    """At 02:00:20 EURUSD is 100 down (0.5 lot x 200 points) and GBPUSD 450 down (0.3 lot x 1500 points,
    its tick of 02:00:10): equity 1000 - 550 = 450 is below 50% of the 940 margin (550 + 390), so the
    larger loser, GBPUSD, is stopped out at 1.28500 at that moment. GBPUSD's next tick (02:00:40, back at
    1.30000) would have left the equity at 900: no stop-out. EURUSD alone never reaches it (it ends +50)."""
    result = _two(1_000.0)
    trades = result.trades
    out = trades[trades["exit_reason"] == "stop out"]
    assert list(out["symbol"]) == ["GBPUSD"]
    assert out["exit_time"].iloc[0] == T0 + pd.Timedelta(seconds=2 * H + 20)
    assert out["exit_price"].iloc[0] == pytest.approx(1.28500)
    assert out["profit"].iloc[0] == pytest.approx(-450.0)
    eur = trades[trades["symbol"] == "EURUSD"]
    assert list(eur["exit_reason"]) == ["end of test"] and eur["profit"].iloc[0] == pytest.approx(50.0)


def test_ticks_a_pending_fill_is_refused_for_the_margin_the_other_symbols_tick_of_that_moment_leaves():
    """A buy stop of 1 lot EURUSD at 1.10100 is reached at 02:00:30 and needs 1101 of margin. GBPUSD then
    stands at its tick of 02:00:10 (450 down): free margin 1900 - 450 - 390 = 1060 is too little, so the
    order is refused (10019). With GBPUSD's later tick (02:00:40, back at its open) it would be 1510."""
    result = _two(1_900.0, stop_lots=1.0)
    stop = result.orders[result.orders["type"] == "buy_stop"].iloc[0]
    assert stop["state"] == "rejected"
    assert stop["time_done"] == T0 + pd.Timedelta(seconds=2 * H + 30)
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert list(result.trades["exit_reason"]) == ["end of test"]  # GBPUSD only; no stop-out: level 372%


def test_ticks_with_enough_free_margin_at_that_moment_the_same_order_fills_there():
    result = _two(2_000.0, stop_lots=1.0)  # free margin 2000 - 450 - 390 = 1160 holds the 1101
    stop = result.orders[result.orders["type"] == "buy_stop"].iloc[0]
    assert stop["state"] == "filled" and stop["time_done"] == T0 + pd.Timedelta(seconds=2 * H + 30)


@pytest.mark.parametrize(
    ("order", "state"), [(("EURUSD", "GBPUSD"), "filled"), (("GBPUSD", "EURUSD"), "rejected")]
)
def test_ticks_of_one_instant_are_worked_in_the_symbols_order(order, state):
    """GBPUSD falls 1500 points at 02:00:20, the instant EURUSD reaches the buy stop. EURUSD first: its tick
    is worked while GBPUSD still stands at its tick before (free margin 1900 - 390 holds the 1101), so it
    fills; GBPUSD first: its fall is worked first and the fill sees it (1900 - 450 - 390 does not)."""
    gbp = [(2 * H + 20, p) if t == 2 * H + 10 else (t, p) for t, p in GBP]
    eur = [(2 * H + 20, p) if t == 2 * H + 30 else (t, p) for t, p in EUR if t != 2 * H + 20]
    ea = type("Ordered", (_Both,), {"symbols": order})
    result = _two(1_900.0, eur=eur, gbp=gbp, ea=ea, stop_lots=1.0)
    stop = result.orders[result.orders["type"] == "buy_stop"].iloc[0]
    assert stop["state"] == state and stop["time_done"] == T0 + pd.Timedelta(seconds=2 * H + 20)


class _Peek(ExpertAdvisor):
    """Reads every route to each symbol's prices at each decision and notes any price or bar from after the
    decision's moment (the main symbol's first tick of the bar): each symbol stands at its last tick at or
    before it."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    timeframes = ("H1", "H4")
    found: ClassVar[list] = []
    opens: ClassVar[dict] = {}

    def on_bar(self):
        now = self.time_current
        for s in self.symbols:
            first = self.opens[s].get(now.floor("h"))
            bid, ask = self.bid_of(s), self.ask_of(s)
            if first is not None and (bid, ask) != first:
                self.found.append(("price", s, now, (bid, ask), first))
            for tf in self.timeframes:
                b = self.data(s, tf)
                if len(b) and b.time[-1] + Timeframe.parse(tf).offset > now:
                    self.found.append(("bar", s, tf, now))
        if not self.positions():
            for s in self.symbols:
                self.buy(0.01, symbol=s)


def test_ticks_a_cheating_ea_gets_nothing_from_the_future():
    frames, ticks = _market(_Peek.symbols, 60)
    _Peek.found = []
    _Peek.opens = {}
    main = ticks[_Peek.symbols[0]]
    decisions = main.groupby(main.index.floor("h")).head(1).index  # the main symbol's first tick of a bar
    for s, t in ticks.items():
        last = np.searchsorted(t.index.asi8, decisions.asi8, side="right") - 1  # at or before it
        _Peek.opens[s] = {
            h: (t["bid"].iloc[r], t["ask"].iloc[r])
            for h, r in zip(decisions.floor("h"), last, strict=True)
            if r >= 0
        }
    result = Backtest(frames, _Peek, model="ticks", ticks=ticks, forward=None).run()
    assert _Peek.found == []
    assert len(result.trades) > 0


def test_ticks_of_a_symbol_the_run_does_not_load_are_refused_by_name():
    frames, ticks = _market(["EURUSD", "GBPUSD", "AUDUSD"], 3)
    ea = type("Two", (_Both,), {"symbols": ("EURUSD", "GBPUSD")})
    with pytest.raises(SymbolsError, match="ticks for AUDUSD, which this run does not load"):
        Backtest({s: frames[s] for s in ea.symbols}, ea, model="ticks", ticks=ticks)


def test_a_loaded_symbol_without_ticks_is_refused_by_name():
    frames, ticks = _market(["EURUSD", "GBPUSD"], 3)
    with pytest.raises(SymbolsError, match="model 'ticks' needs the ticks of GBPUSD too"):
        Backtest(frames, _Both, model="ticks", ticks={"EURUSD": ticks["EURUSD"]})


def test_ticks_outside_their_bars_range_name_the_symbol_the_file_and_the_row():
    ticks = {"EURUSD": _hand_ticks("EURUSD", EUR), "GBPUSD": _hand_ticks("GBPUSD", GBP)}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    spike = [*GBP[:4], (2 * H + 15, 1.4), *GBP[4:]]
    ticks["GBPUSD"] = _hand_ticks("GBPUSD", spike)
    with pytest.raises(ModelDataError, match=r"^GBPUSD: gbpusd_ticks.csv: row 5 .*bid 1.40000 lies above"):
        Backtest(frames, _Both, model="ticks", ticks=ticks)


def test_ticks_are_refused_with_another_model_and_m1_with_ticks():
    frames, ticks = _market(["EURUSD", "GBPUSD"], 3)
    with pytest.raises(SymbolsError, match="ticks are only used by model 'ticks'"):
        Backtest(frames, _Both, model="open", ticks=ticks)


def test_empty_ticks_of_one_symbol_are_refused_naming_it():
    frames, ticks = _market(["EURUSD", "GBPUSD"], 3)
    empty = ticks["GBPUSD"].iloc[:0]
    with pytest.raises(ModelDataError, match=r"^GBPUSD: the ticks are empty"):
        Backtest(frames, _Both, model="ticks", ticks={**ticks, "GBPUSD": empty})


class _Heavy(ExpertAdvisor):
    """Holds a lot of each symbol, reopened whenever closed, on a deposit that barely carries both."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        for s in self.symbols:
            if not self.position_of(s):
                self.sell(1.0, symbol=s)


def test_ticks_ruling_the_stop_out_out_for_a_bar_never_hides_one(monkeypatch):
    """The bound that skips the ticks where no stop-out can happen, against every tick of every symbol."""
    import backtests.merged_ticks as merged

    frames, ticks = _market(_Heavy.symbols, 120)
    account = AccountConfig(deposit=2_400.0, stop_out_level=90.0)  # out after about 130 points of loss
    screened = Backtest(frames, _Heavy, model="ticks", ticks=ticks, account=account, forward=None).run()
    monkeypatch.setattr(merged, "_stop_out_possible", lambda *args: True)
    full = Backtest(frames, _Heavy, model="ticks", ticks=ticks, account=account, forward=None).run()
    assert (screened.trades["exit_reason"] == "stop out").sum() > 0
    cols = ["symbol", "type", "lots", "entry_time", "exit_time", "exit_price", "exit_reason", "profit"]
    pd.testing.assert_frame_equal(screened.trades[cols], full.trades[cols])


class _Cross(ExpertAdvisor):
    """1 lot of EURGBP at the second bar: its pounds converted through GBPUSD, its euro margin through
    EURUSD."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")


def test_ticks_a_profit_converted_through_another_symbol_reads_that_symbols_tick_of_the_moment():
    """EURGBP falls 1000 points at 02:00:20 (-1000 GBP). GBPUSD's bar opens only at 02:00:30, at 1.20; at
    02:00:20 it still stands at its last tick before, 1.30, so the loss is 1300 USD: equity 1800 - 1300 =
    500 is below 50% of the 1100 margin (1 lot x 100,000 EUR / 100 at EURUSD's 1.10), and EURGBP is stopped
    out there at 0.84000, booked -1300.00. Read at GBPUSD's first tick of its bar (later), the loss would be
    1200 and the level 600 / 1100: no stop-out."""
    rows = {
        "EURGBP": [(0, 0.85), (H, 0.85), (2 * H, 0.85), (2 * H + 20, 0.84), (3 * H, 0.84), (4 * H - 1, 0.84)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H - 1, 1.3), (2 * H + 30, 1.2), (3 * H, 1.2), (4 * H - 1, 1.2)],
        "EURUSD": [(0, 1.1), (H, 1.1), (2 * H, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)],
    }
    ticks = {s: _hand_ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    account = AccountConfig(deposit=1_800.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = Backtest(frames, _Cross, model="ticks", ticks=ticks, account=account, forward=None).run()
    trade = result.trades.iloc[0]
    assert (trade["symbol"], trade["exit_reason"]) == ("EURGBP", "stop out")
    assert trade["exit_time"] == T0 + pd.Timedelta(seconds=2 * H + 20)
    assert trade["exit_price"] == pytest.approx(0.84) and trade["profit"] == pytest.approx(-1300.0)


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_optimize_takes_a_multi_symbol_ea_on_every_symbols_minutes_or_ticks(model):
    """Each symbol's minutes or ticks cut to the pass's window (they were taken for one frame and failed)."""
    from backtests.optimize import optimize

    frames, ticks = _market(_Brackets.symbols, 60)
    fine = ticks if model == "ticks" else {s: bars_from_ticks(t, "M1") for s, t in ticks.items()}
    data = {"ticks": fine} if model == "ticks" else {"m1": fine}
    table = optimize(frames, _Brackets, ["lots=0.1,0.2"], criterion="balance", workers=0, model=model, **data)
    one = Backtest(frames, _Brackets, model=model, forward=None, **data).run(lots=0.2)
    by_lots = {round(r["lots"], 2): r for _, r in table.iterrows()}
    assert by_lots[0.2]["total_trades"] == len(one.trades) > 0
    assert by_lots[0.2]["total_net_profit"] == pytest.approx(one.trades["net_profit"].sum(), abs=0.005)


class _LateTick(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        self.seen.append((self.time_current, self.bid_of("GBPUSD")))
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD")


def test_ticks_a_symbol_whose_first_tick_of_the_bar_comes_later_stands_at_its_last_tick():
    """EURUSD ticks at 01:00:00; GBPUSD's last tick before is 00:59:50 at 1.30000 and its next 01:05:00 at
    1.35000. At the decision (01:00:00) MetaTrader's tester has given GBPUSD no newer tick: its bid is
    1.30000 and a market buy fills there, then gains 0.05 x 100,000 = 5,000.00 by the end. Its first tick of
    the bar would show the EA, and fill it at, a price five minutes ahead."""
    _LateTick.seen = []
    eur = [(0, 1.1), (H, 1.1), (H + 10, 1.1), (2 * H, 1.1), (3 * H - 1, 1.1)]
    gbp = [(0, 1.3), (H - 10, 1.3), (H + 300, 1.35), (2 * H, 1.35), (3 * H - 1, 1.35)]
    result = _two(100_000.0, eur=eur, gbp=gbp, ea=_LateTick)
    assert dict(_LateTick.seen)[T0 + pd.Timedelta(hours=1)] == 1.3
    trade = result.trades.iloc[0]
    assert trade["symbol"] == "GBPUSD" and trade["entry_price"] == 1.3
    assert trade["profit"] == 5_000.0


class _CloseAll(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD", sl=1.29)
        elif len(self.bars) == 2:
            self.seen.append(len(self.positions(symbol="GBPUSD")))
            self.close(symbol="GBPUSD")


def test_ticks_a_stop_reached_before_the_decision_closes_before_it_not_at_the_decisions_price():
    """GBPUSD (long 1 lot, SL 1.29000) opens the third hour at 1.30000 and falls to 1.28000 five seconds in;
    EURUSD's first tick of that hour, where the EA decides, comes at ten seconds. The stop was reached before
    the decision: the position is closed there (at 1.28000, the tick that passed it: -2,000.00) and the EA
    finds it gone, not open to be closed at the decision's price."""
    _CloseAll.seen = []
    eur = [(0, 1.1), (H, 1.1), (2 * H + 10, 1.1), (3 * H - 1, 1.1)]
    gbp = [(0, 1.3), (H, 1.3), (2 * H, 1.3), (2 * H + 5, 1.28), (2 * H + 20, 1.28), (3 * H - 1, 1.28)]
    result = _two(100_000.0, eur=eur, gbp=gbp, ea=_CloseAll)
    assert _CloseAll.seen == [0]
    trade = result.trades.iloc[0]
    assert trade["exit_reason"] == "sl" and trade["exit_price"] == 1.28
    assert trade["exit_time"] == T0 + pd.Timedelta(hours=2, seconds=5)
    assert trade["profit"] == -2_000.0


class _HeldAcrossALateTick(ExpertAdvisor):
    """1 lot of GBPUSD with its levels 1,000 points away, bought or sold at the second bar."""

    symbols = ("EURUSD", "GBPUSD")
    side = +1

    def on_bar(self):
        if len(self.bars) == 1:
            if self.side > 0:
                self.buy(1.0, symbol="GBPUSD", sl=1.29, tp=1.40)
            else:
                self.sell(1.0, symbol="GBPUSD", sl=1.40, tp=1.29)
            self.buy_limit(1.0, 1.29, symbol="GBPUSD")


@pytest.mark.parametrize(("side", "profit"), [(+1, 1_000.0), (-1, -1_000.0)], ids=["long", "short"])
def test_ticks_a_symbol_whose_first_tick_comes_later_is_checked_at_its_last_tick_in_points(side, profit):
    """GBPUSD, 1 lot at 1.30000 with its SL or TP at 1.29000 and a buy limit at 1.29000, stands at its
    01:59:50 tick (1.30000) when the third hour opens on EURUSD's tick; its next tick is 1.31000 at
    02:05:00, where it stays. Nothing is reached: the position ends the test at 1.31000 (+1,000.00 long,
    -1,000.00 short) and the limit is never filled. The opening checks of that late symbol read its bid as
    1.3 points (the price, not 130,000 points), so every level above it was "reached": the long's stop
    booked -129,998.70 at 0.000013, and the short was closed by the buy limit filled there, +129,998.70."""
    _HeldAcrossALateTick.side = side
    eur = [(0, 1.1), (H, 1.1), (2 * H, 1.1), (2 * H + 10, 1.1), (3 * H - 1, 1.1)]
    gbp = [(0, 1.3), (H, 1.3), (2 * H - 10, 1.3), (2 * H + 300, 1.31), (3 * H - 1, 1.31)]
    result = _two(1_000_000.0, eur=eur, gbp=gbp, ea=_HeldAcrossALateTick)
    trades = result.trades
    assert len(trades) == 1
    trade = trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_price"], trade["profit"]) == ("end of test", 1.31, profit)
    assert result.stats["total_net_profit"] == profit


class _TodayOnALateSymbol(ExpertAdvisor):
    """At the first decision of a server day: a GBPUSD buy limit far below the market, good for "today"."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if self.time_current.hour == 0 and not self.orders():
            self.buy_limit(1.0, 1.2, symbol="GBPUSD", expiration="today")


def test_ticks_a_request_on_a_symbol_standing_at_an_older_tick_is_timed_at_the_decision():
    """The EA decides at 00:00:00 on 3 January (EURUSD's tick); GBPUSD's newest tick is of 23:59:50 the
    day before, its next of 00:05:00. The order is placed at 00:00:00 (MetaTrader's ``TimeCurrent``, the
    newest tick of any symbol), good until the end of 3 January, and still working when the test ends at
    01:00. It was stamped 23:59:50 (before the EA decided), its "today" read as 2 January, and it expired
    at GBPUSD's next tick, five minutes after it was placed."""
    day = 24 * H
    eur = [(0, 1.1), (day - H, 1.1), (day, 1.1), (day + 10, 1.1), (day + H, 1.1), (day + 2 * H - 1, 1.1)]
    gbp = [
        (0, 1.3),
        (day - H, 1.3),
        (day - 10, 1.3),
        (day + 300, 1.31),
        (day + H, 1.31),
        (day + 2 * H - 1, 1.31),
    ]
    result = _two(100_000.0, eur=eur, gbp=gbp, ea=_TodayOnALateSymbol)
    order = result.orders.iloc[0]
    assert order["time_setup"] == T0 + pd.Timedelta(days=1)
    assert (order["state"], order["time_done"]) == ("canceled", T0 + pd.Timedelta(days=1, hours=1))
