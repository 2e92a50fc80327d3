"""Several symbols on one account: money converted as MetaTrader books it, one timeline, the EA's views of
every declared symbol and timeframe, and the bad inputs a multi-symbol run refuses."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from backtests.broker import AccountConfig
from backtests.broker.account import cents
from backtests.broker.portfolio import ConversionError, open_brokers
from backtests.errors import SymbolsError
from backtests.merged import walk_bar
from backtests.paths import M1Path
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.resample import resample
from datafeeds.symbols import BUILTIN, UnknownSpecError
from datafeeds.synthetic import synthetic_candles
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor
from strategies.errors import EAError, EARuntimeError

TIME = pd.date_range("2024-01-02", periods=4, freq="h", tz="UTC")


def _cols(opens, spread_points):
    """Bars of constant prices at ``opens`` (one per bar) with ``spread_points``."""
    o = np.asarray(opens, dtype=float)
    return (o, o, o, o, np.full(len(o), float(spread_points)), TIME[: len(o)])


def _brokers(columns, account=None):
    return open_brokers(columns, {s: BUILTIN[s] for s in columns}, account or AccountConfig(), UTC)


def _at(brokers, t):
    """Every broker enters bar ``t`` before any is checked (as the multi-symbol replay does)."""
    firsts = [b.enter(t) for b in brokers.values()]
    for b, first in zip(brokers.values(), firsts, strict=True):
        b.open_checks(t, first)


def test_usdjpy_profit_in_yen_is_converted_to_dollars_at_usdjpy():
    brokers = _brokers({"USDJPY": _cols([150.000, 151.000, 151.000], 20)})
    jpy = brokers["USDJPY"]
    _at(brokers, 0)
    jpy.order(+1, 1.0, None, None, 0, "")  # at the ask 150.020
    _at(brokers, 1)
    jpy.close(None, None)  # at the bid 151.000
    trade = jpy.trades_frame().iloc[0]
    # (151.000 - 150.020) * 100,000 = 98,000 JPY, a gain sold for dollars: divided by USDJPY's ask 151.020
    assert trade["profit"] == cents(98_000 / 151.020)  # booked in whole cents: 648.92
    assert trade["symbol"] == "USDJPY"


def test_eurgbp_loss_in_pounds_is_bought_with_dollars_at_the_gbpusd_ask():
    brokers = _brokers(
        {
            "EURGBP": _cols([0.85000, 0.84000, 0.84000], 10),
            "GBPUSD": _cols([1.25000, 1.25000, 1.25000], 10),
            "EURUSD": _cols([1.10000, 1.10000, 1.10000], 10),  # its margin's euros
        }
    )
    eg = brokers["EURGBP"]
    _at(brokers, 0)
    eg.order(+1, 1.0, None, None, 0, "")  # at the ask 0.85010
    _at(brokers, 1)
    eg.close(None, None)  # at the bid 0.84000: -1,010 GBP
    trade = eg.trades_frame().iloc[0]
    assert trade["profit"] == cents(-1_010 * 1.25010)  # GBPUSD's ask, the dearer side: -1262.60


def test_margin_of_a_three_symbol_basket_in_dollars():
    brokers = _brokers(
        {
            "EURUSD": _cols([1.10000, 1.10000], 10),
            "USDJPY": _cols([150.000, 150.000], 20),
            "EURGBP": _cols([0.85000, 0.85000], 10),
            "GBPUSD": _cols([1.25000, 1.25000], 10),  # its profit's pounds
        }
    )
    _at(brokers, 0)
    assert brokers["EURUSD"].order(+1, 1.0, None, None, 0, "")
    assert brokers["USDJPY"].order(+1, 1.0, None, None, 0, "")
    assert brokers["EURGBP"].order(-1, 1.0, None, None, 0, "")
    margin = brokers["EURUSD"].account().margin
    # EURUSD: 100,000 EUR / 100 at the ask 1.10010 = 1,100.10; USDJPY: 100,000 USD / 100 = 1,000;
    # EURGBP sold: 100,000 EUR / 100 at EURUSD's bid 1.10000 = 1,100.00
    assert margin == pytest.approx(1_100.10 + 1_000.00 + 1_100.00, abs=1e-9)
    assert brokers["USDJPY"].account().margin == pytest.approx(margin)  # one account


def test_stop_out_closes_the_accounts_largest_loser_first_and_checks_again():
    account = AccountConfig(deposit=1_000.0, spread=0)
    brokers = _brokers(
        {
            "EURUSD": _cols([1.10000, 1.10000, 1.08500, 1.08500], 0),
            "USDJPY": _cols([150.000, 150.000, 150.000, 150.000], 0),
        },
        account,
    )
    _at(brokers, 0)
    brokers["EURUSD"].order(+1, 0.5, None, None, 0, "")  # margin 550
    brokers["USDJPY"].order(+1, 0.3, None, None, 0, "")  # margin 300
    _at(brokers, 1)
    assert not brokers["EURUSD"].trades
    _at(brokers, 2)  # EURUSD -0.015 x 50,000 = -750: equity 250 on margin 850 (29% < 50%)
    trades = brokers["EURUSD"].trades_frame()
    assert list(trades["symbol"]) == ["EURUSD"] and trades["exit_reason"].iloc[0] == "stop out"
    assert trades["profit"].iloc[0] == pytest.approx(-750.0)
    # re-checked: equity 250 on USDJPY's margin 300 is 83% > 50%, so USDJPY stays open
    assert len(brokers["USDJPY"].book.positions) == 1


def test_stop_out_goes_on_to_the_next_symbol_while_the_level_stays_crossed():
    account = AccountConfig(deposit=1_000.0, spread=0)
    brokers = _brokers(
        {
            "EURUSD": _cols([1.10000, 1.08500, 1.08500], 0),
            "GBPUSD": _cols([1.30000, 1.29000, 1.29000], 0),
        },
        account,
    )
    _at(brokers, 0)
    brokers["EURUSD"].order(+1, 0.5, None, None, 0, "")  # margin 550, then -750
    brokers["GBPUSD"].order(+1, 0.3, None, None, 0, "")  # margin 390, then -300
    _at(brokers, 1)  # equity -50: both closed, the larger loser first
    trades = brokers["EURUSD"].trades_frame()
    assert list(trades["symbol"]) == ["EURUSD", "GBPUSD"]
    assert list(trades["exit_reason"]) == ["stop out", "stop out"]


class _Flip(ExpertAdvisor):
    """Follows each symbol's last bar, independently: long after an up bar, short after a down bar."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")
    lots = 0.1

    def on_bar(self):
        for s in self.symbols:
            bars = self.data(s)
            if len(bars) < 2:
                continue
            up = bars.close[-1] > bars.close[-2]
            held = self.position_of(s)
            if (up and held <= 0) or (not up and held >= 0):
                self.close(symbol=s)
                (self.buy if up else self.sell)(self.lots, symbol=s, comment=s)


def _frames(symbols, n=600):
    return {s: synthetic_candles(s, "H1", n, seed=i + 1) for i, s in enumerate(symbols)}


def test_three_independent_symbols_equal_three_single_symbol_runs():
    frames = _frames(_Flip.symbols)
    multi = Backtest(frames, _Flip).run()
    singles = {}
    for s in _Flip.symbols:
        one = type(f"Flip{s}", (_Flip,), {"symbols": (s,)})
        singles[s] = Backtest(frames[s], one).run()
    cols = ["type", "lots", "entry_time", "entry_price", "exit_time", "exit_price", "profit"]
    for s, single in singles.items():
        mine = multi.trades[multi.trades["symbol"] == s].reset_index(drop=True)
        assert len(mine) == len(single.trades) > 20
        pd.testing.assert_frame_equal(
            mine[cols], single.trades[cols].reset_index(drop=True), check_exact=False
        )
    deposit = AccountConfig().deposit
    summed = deposit + sum(r.equity["equity"].to_numpy() - deposit for r in singles.values())
    np.testing.assert_allclose(multi.equity["equity"].to_numpy(), summed, rtol=0, atol=1e-6)
    table = multi.data["symbols"]
    assert {s: table[s]["trades"] for s in _Flip.symbols} == {s: len(r.trades) for s, r in singles.items()}


class _Watcher(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "D1")
    seen: ClassVar[list] = []

    def on_bar(self):
        d1 = self.data("GBPUSD", "D1")
        self.seen.append((self.time_current, d1.time[-1] if len(d1) else None, len(d1), len(self.bars)))


def test_a_d1_bar_is_invisible_until_it_has_closed():
    _Watcher.seen = []
    Backtest(_frames(_Watcher.symbols, 24 * 20), _Watcher).run()
    assert _Watcher.seen
    for now, newest, _, _ in _Watcher.seen:
        assert newest is None or newest + pd.Timedelta(days=1) <= now  # closed by the decision time
    at_midnight = [
        (now, newest) for now, newest, _, _ in _Watcher.seen if now.hour == 0 and newest is not None
    ]
    assert at_midnight and all(newest == now - pd.Timedelta(days=1) for now, newest in at_midnight)


class _Cheat(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "H4")
    found: ClassVar[list] = []

    def on_bar(self):
        now = self.time_current
        for s in self.symbols:
            for tf in self.timeframes:
                b = self.data(s, tf)
                if not len(b):
                    continue
                base = np.asarray(b.close).base
                tail = base[len(b) :] if base is not None and base.ndim == 1 else np.array([])
                if np.isfinite(tail).any():
                    self.found.append(("base", s, tf, now))
                if b.time[-1] + Timeframe.parse(tf).offset > now:
                    self.found.append(("unclosed", s, tf, now))
                try:
                    b.window(0, len(b) + 1)
                    self.found.append(("window", s, tf, now))
                except EAError:
                    pass
                frame = b.frame()
                if len(frame) != len(b) or frame.index[-1] + Timeframe.parse(tf).offset > now:
                    self.found.append(("frame", s, tf, now))


def test_a_cheating_ea_gets_nothing_from_the_future_through_data():
    _Cheat.found = []
    Backtest(_frames(_Cheat.symbols, 300), _Cheat).run()
    assert _Cheat.found == []


class _Reads(ExpertAdvisor):
    symbols = ("EURUSD",)
    timeframes = ("H1", "M15")


class _Undeclared(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        self.data("USDJPY")


@pytest.mark.parametrize(
    "frames, ea, error, words",
    [
        (lambda: _frames(["EURUSD"]), _Reads, SymbolsError, "M15 of EURUSD"),
        (lambda: _frames(["EURUSD"]), _Flip, SymbolsError, "GBPUSD, AUDUSD"),
        (lambda: _frames(["EURUSD", "EURGBP"]), type("Cross", (_Flip,), {"symbols": ("EURUSD", "EURGBP")}),
         ConversionError, "GBPUSD or USDGBP"),
        (lambda: _frames(["EURUSD", "GBPUSD"]), type("Twice", (_Flip,), {"symbols": ("EURUSD", "EURUSD")}),
         SymbolsError, "names one twice"),
        (lambda: _frames(["EURUSD", "GBPUSD"]), _Undeclared, EARuntimeError, "not declared"),
    ],
)  # fmt: skip
def test_bad_multi_symbol_input_is_one_clear_error(frames, ea, error, words):
    with pytest.raises(error, match=words):
        Backtest(frames(), ea).run()


def test_a_symbol_without_a_specification_is_refused_by_name():
    meta = CandleMeta("FOOBAR", Timeframe.H1, 5)
    df = synthetic_candles("EURUSD", "H1", 200, seed=1)
    foo = make_frame(df, df.index, meta)
    with pytest.raises(UnknownSpecError, match="'FOOBAR'"):
        ea = type("Foo", (_Flip,), {"symbols": ("EURUSD", "FOOBAR")})
        Backtest({"EURUSD": _frames(["EURUSD"])["EURUSD"], "FOOBAR": foo}, ea).run()


def test_a_symbol_missing_bars_keeps_its_last_bar_and_the_report_counts_them():
    frames = _frames(["EURUSD", "GBPUSD"], 300)
    gbp = frames["GBPUSD"]
    frames["GBPUSD"] = make_frame(
        gbp.drop(gbp.index[100:110]), gbp.index.drop(gbp.index[100:110]), gbp.attrs["candles"]
    )
    seen = []

    class Look(ExpertAdvisor):
        symbols = ("EURUSD", "GBPUSD")

        def on_bar(self):
            seen.append((self.time_current, self.data("GBPUSD").time[-1]))

    result = Backtest(frames, Look, forward=None).run()
    assert result.data["symbols"]["GBPUSD"]["lacked_bars"] == 10
    assert result.data["symbols"]["EURUSD"]["lacked_bars"] == 0
    gap = [newest for now, newest in seen if gbp.index[100] < now <= gbp.index[110]]
    assert gap and all(newest == gbp.index[99] for newest in gap)


class _Stops(_Flip):
    """``_Flip`` with a stop-loss and a take-profit, so the minutes inside each bar decide the exits."""

    def on_bar(self):
        for s in self.symbols:
            bars = self.data(s)
            if len(bars) < 2 or self.position_of(s):
                continue
            up = bars.close[-1] > bars.close[-2]
            (self.buy if up else self.sell)(self.lots, symbol=s, sl_points=60, tp_points=90)


def _minutes(symbols, hours=300):
    m1 = {s: synthetic_candles(s, "M1", hours * 60, seed=i + 1) for i, s in enumerate(symbols)}
    return {s: resample(df, "H1") for s, df in m1.items()}, m1


def test_ohlc1m_three_independent_symbols_equal_three_single_symbol_runs():
    frames, m1 = _minutes(_Stops.symbols)
    multi = Backtest(frames, _Stops, model="ohlc1m", m1=m1).run()
    cols = ["type", "entry_time", "entry_price", "exit_time", "exit_price", "exit_reason", "profit"]
    deposit = AccountConfig().deposit
    summed = np.full(len(multi.equity), deposit)
    for s in _Stops.symbols:
        one = type(f"Stops{s}", (_Stops,), {"symbols": (s,)})
        single = Backtest(frames[s], one, model="ohlc1m", m1=m1[s]).run()
        mine = multi.trades[multi.trades["symbol"] == s].reset_index(drop=True)
        assert len(mine) == len(single.trades) > 10
        assert set(mine["exit_reason"]) >= {"sl", "tp"}  # exits inside bars, found on the minutes
        pd.testing.assert_frame_equal(mine[cols], single.trades[cols].reset_index(drop=True))
        summed += single.equity["equity"].to_numpy() - deposit
    np.testing.assert_allclose(multi.equity["equity"].to_numpy(), summed, rtol=0, atol=1e-6)


def test_ohlc1m_minutes_of_a_symbol_the_run_does_not_load_are_refused_by_name():
    frames, m1 = _minutes(["EURUSD", "GBPUSD", "AUDUSD"], 50)
    ea = type("Two", (_Flip,), {"symbols": ("EURUSD", "GBPUSD")})
    with pytest.raises(SymbolsError, match="M1 candles for AUDUSD"):
        Backtest({s: frames[s] for s in ea.symbols}, ea, model="ohlc1m", m1=m1)


def _minute_frame(symbol, prices):
    """M1 candles of constant minutes at ``prices`` (one per minute) from ``TIME[0]``."""
    p = np.asarray(prices, dtype=float)
    index = pd.date_range(TIME[0], periods=len(p), freq="min", tz="UTC")
    data = {"open": p, "high": p, "low": p, "close": p, "spread": np.zeros(len(p), dtype=np.int32)}
    return make_frame(data, index, CandleMeta(symbol, Timeframe.M1, 5))


def test_ohlc1m_stop_out_sees_the_other_symbols_minute_of_the_same_time():
    """GBPUSD falls at minute 5 (-450 on 0.3 lots), EURUSD at minute 20 (-100 on 0.5 lots): neither alone
    reaches the stop-out (equity below 50% of the 940 margin: a loss over 530), both together do, at minute
    20. The larger loser, GBPUSD, is closed at its price of that minute; then the level is 450 / 550."""
    gbp = [1.30000] * 65 + [1.28500] * 115
    eur = [1.10000] * 80 + [1.09800] * 100
    m1 = {"EURUSD": _minute_frame("EURUSD", eur), "GBPUSD": _minute_frame("GBPUSD", gbp)}
    hours = {s: resample(df, "H1") for s, df in m1.items()}
    columns = {
        s: (*(df[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(3), df.index)
        for s, df in hours.items()
    }
    brokers = _brokers(columns, AccountConfig(deposit=1_000.0, spread=0))
    for s, b in brokers.items():
        b.attach_path(M1Path(hours[s].index, m1[s], 1e-5, 0).for_run(None))
    _at(brokers, 0)
    brokers["EURUSD"].order(+1, 0.5, None, None, 0, "")
    brokers["GBPUSD"].order(+1, 0.3, None, None, 0, "")
    walk_bar(list(brokers.values()), 0)
    _at(brokers, 1)
    walk_bar(list(brokers.values()), 1)
    trades = brokers["EURUSD"].trades_frame()
    assert list(trades["symbol"]) == ["GBPUSD"] and trades["exit_reason"].iloc[0] == "stop out"
    assert trades["exit_time"].iloc[0] == TIME[1] + pd.Timedelta(minutes=20)
    assert trades["exit_price"].iloc[0] == pytest.approx(1.28500)
    assert trades["profit"].iloc[0] == pytest.approx(-450.0)
    assert len(brokers["EURUSD"].book.positions) == 1


class _Lots(_Flip):
    """``_Flip`` whose volume is the optimised parameter: a pass's profit is linear in it."""

    symbols = ("EURUSD", "USDJPY")
    lots = 0.1


def test_optimize_and_walk_forward_take_a_multi_symbol_ea():
    from backtests.optimize import optimize, walk_forward

    frames = _frames(_Lots.symbols, 400)
    table = optimize(frames, _Lots, ["lots=0.1,0.2"], criterion="balance", workers=0)
    by_lots = {round(r["lots"], 2): r for _, r in table.iterrows()}
    one = Backtest(frames, _Lots, forward=None).run(lots=0.2)
    assert by_lots[0.2]["total_trades"] == len(one.trades)  # a pass is the multi-symbol backtest
    assert set(one.trades["symbol"]) == set(_Lots.symbols)
    result = walk_forward(
        frames, _Lots, ["lots=0.1,0.2"], train=200, test=100, criterion="balance", workers=0
    )
    assert len(result.windows) == 2


def test_a_conversion_pair_with_gaps_is_refused_by_name_before_the_run():
    frames = _frames(["EURUSD", "USDJPY", "EURGBP", "GBPUSD"], 300)
    gbp = frames["GBPUSD"]
    kept = gbp.index.drop(gbp.index[50:53])
    frames["GBPUSD"] = make_frame(gbp.loc[kept], kept, gbp.attrs["candles"])
    ea = type("Cross", (_Flip,), {"symbols": ("EURUSD", "EURGBP")})
    with pytest.raises(
        SymbolsError, match=r"EURGBP: its profit is converted through GBPUSD, which has no bar at 3"
    ):
        Backtest(frames, ea)


def test_synthetic_symbols_of_one_seed_move_together_and_repeat_exactly():
    from neuronet.commands.symbols import load_symbols

    def returns(seed):
        frames, _ = load_symbols(
            ("EURUSD", "GBPUSD"), "synthetic", "H1", None, None, {"seed": seed, "bars": 3000}, "USD"
        )
        return {s: np.diff(np.log(df["close"].to_numpy())) for s, df in frames.items()}

    a, b = returns(3), returns(3)
    assert all(np.array_equal(a[s], b[s]) for s in a)  # the README's figures on every machine
    rho = np.corrcoef(a["EURUSD"], a["GBPUSD"])[0, 1]
    assert 0.3 < rho < 0.7  # a shared shock of correlation 0.5 (less: each has its own volatility)
    assert not np.array_equal(a["EURUSD"], a["GBPUSD"])


def test_an_ea_declaring_one_symbol_is_refused_on_another_symbols_candles():
    ea = type("Gbp", (_Flip,), {"symbols": ("GBPUSD",)})
    with pytest.raises(SymbolsError, match="Gbp trades GBPUSD, but the candles given are EURUSD's"):
        Backtest(_frames(["EURUSD"])["EURUSD"], ea)
    d1 = type("Daily", (_Flip,), {"symbols": ("EURUSD",), "timeframes": ("D1",)})
    with pytest.raises(SymbolsError, match="Daily reads D1, but the candles given are H1 bars"):
        Backtest(_frames(["EURUSD"])["EURUSD"], d1)


class _Heavy(ExpertAdvisor):
    """Holds a lot of each symbol, reopened whenever closed, on a deposit that barely carries both."""

    symbols = ("EURUSD", "GBPUSD")
    side = 1

    def on_bar(self):
        for s in self.symbols:
            if not self.position_of(s):
                (self.buy if self.side > 0 else self.sell)(1.0, symbol=s)


def test_ruling_the_stop_out_out_per_bar_never_hides_one(monkeypatch):
    from backtests.broker.account import Account

    frames = _frames(_Heavy.symbols, 2000)
    account = AccountConfig(deposit=3_000.0)
    screened = Backtest(frames, _Heavy, account=account, forward=None).run(side=-1)
    monkeypatch.setattr(Account, "ruled_out", lambda self, t: False)  # every check in full
    full = Backtest(frames, _Heavy, account=account, forward=None).run(side=-1)
    assert (screened.trades["exit_reason"] == "stop out").sum() > 0
    cols = ["symbol", "type", "lots", "entry_time", "exit_time", "exit_price", "exit_reason", "profit"]
    pd.testing.assert_frame_equal(screened.trades[cols], full.trades[cols])
