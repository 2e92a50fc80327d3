"""Hostile cases of multi-symbol, multi-timeframe runs: bars of a broker clock seen before they close, and
another symbol's price later in the minute being worked."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from backtests.broker import AccountConfig
from backtests.broker.account import cents
from backtests.broker.portfolio import open_brokers
from backtests.merged import walk_bar
from backtests.paths import M1Path
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC, BrokerClock
from datafeeds.resample import resample
from datafeeds.symbols import BUILTIN
from datafeeds.synthetic import synthetic_candles
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor


class _Monthly(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "MN1")
    seen: ClassVar[list] = []

    def on_bar(self):
        view = self.data("GBPUSD", self.timeframes[1])
        if len(view):
            self.seen.append((self.time_current, view.time[-1]))


class _Daily(_Monthly):
    timeframes = ("H1", "D1")


def _last_h1_open(h1: pd.DataFrame, clock: BrokerClock, label: pd.Timestamp, timeframe: str) -> pd.Timestamp:
    """The open time of the last H1 bar inside the higher bar opened at ``label`` (UTC), grouped by the
    broker's calendar, computed here independently of the library."""
    broker = clock.to_broker_seconds(h1.index.as_unit("s").asi8).astype("datetime64[s]")
    own = clock.to_broker_seconds(np.array([label.value // 10**9]))[0].astype("datetime64[s]")
    unit = "M" if timeframe == "MN1" else "D"
    return h1.index[broker.astype(f"datetime64[{unit}]") == own.astype(f"datetime64[{unit}]")][-1]


@pytest.mark.parametrize(
    ("ea", "clock", "start", "hours"),
    [
        (_Monthly, BrokerClock(2.0, "none"), "2024-01-01", 24 * 75),
        (_Daily, BrokerClock(2.0, "us"), "2024-10-28", 24 * 10),  # New York falls back on 3 November
    ],
    ids=["MN1 at UTC+2", "D1 at UTC+2/us over the autumn switch"],
)
def test_a_higher_bar_of_a_broker_clock_is_invisible_until_its_last_hour_has_closed(ea, clock, start, hours):
    ea.seen = []
    frames = {
        s: synthetic_candles(s, "H1", hours, seed=i + 1, clock=clock, start=start)
        for i, s in enumerate(ea.symbols)
    }
    Backtest(frames, ea).run()
    assert len(ea.seen) > 100
    early = [
        (now, label)
        for now, label in ea.seen
        if _last_h1_open(frames["GBPUSD"], clock, label, ea.timeframes[1]) + pd.Timedelta(hours=1) > now
    ]
    assert early == []


class _HoldEurgbp(ExpertAdvisor):
    symbols = ("EURGBP",)

    def on_bar(self):
        if not self.positions():
            self.buy(1.0, symbol="EURGBP")


@pytest.mark.parametrize("move", [+0.04, -0.04], ids=["GBPUSD up", "GBPUSD down"])
def test_an_end_of_test_deal_is_converted_at_the_pairs_last_close_not_its_last_open(move):
    """GBPUSD moves 4% in the last bar: the end-of-test deal of EURGBP at that bar's close converts its pounds
    at GBPUSD's close (a gain at the bid, a loss at the ask), as the equity at that close does, not at the
    open an hour earlier."""
    frames = {
        s: synthetic_candles(s, "H1", 60, seed=i + 7) for i, s in enumerate(("EURGBP", "GBPUSD", "EURUSD"))
    }
    gbp = frames["GBPUSD"].copy()
    last = gbp.index[-1]
    close = round(gbp.at[last, "open"] * (1 + move), 5)
    gbp.loc[last, "close"] = close
    gbp.loc[last, "high"] = max(gbp.at[last, "open"], close)
    gbp.loc[last, "low"] = min(gbp.at[last, "open"], close)
    frames["GBPUSD"] = make_frame(gbp, gbp.index, gbp.attrs["candles"])
    result = Backtest(frames, _HoldEurgbp).run()
    trade = result.trades.iloc[-1]
    assert trade["exit_time"] == last and trade["lots"] == 1.0
    pounds = round((trade["exit_price"] - trade["entry_price"]) * 100_000, 2)
    rate = close if pounds > 0 else round(close + gbp.at[last, "spread"] * 1e-5, 5)
    assert trade["profit"] == cents(pounds * rate)
    assert result.equity["equity"].iloc[-1] == pytest.approx(result.equity["balance"].iloc[-1], abs=0.005)


def test_a_converted_swap_is_booked_in_whole_cents_and_the_balance_equals_the_trades():
    """USDJPY held long over one server midnight at a swap of -7.3 points a lot: -730 yen, bought with dollars
    at the rollover's USDJPY bid 150.000 (a loss is divided by the bid): -4.8667, booked as -4.87. The balance
    moves by exactly what the trade reports, in whole cents."""
    from dataclasses import replace

    from backtests.broker import AccountConfig
    from backtests.broker.portfolio import open_brokers
    from datafeeds.clock import UTC
    from datafeeds.symbols import BUILTIN

    time = pd.DatetimeIndex(["2024-01-02 22:00", "2024-01-02 23:00", "2024-01-03 00:00"], tz="UTC")
    o = np.array([150.000, 150.000, 150.000])
    columns = {"USDJPY": (o, o, o, o, np.full(3, 10.0), time)}
    specs = {"USDJPY": replace(BUILTIN["USDJPY"], swap_long=-7.3)}
    brokers = open_brokers(columns, specs, AccountConfig(), UTC)
    uj = brokers["USDJPY"]
    for t in range(3):
        uj.open_checks(t, uj.enter(t))
        if t == 0:
            uj.order(+1, 1.0, None, None, 0, "")
        uj.bar_range(t)
    uj.finish(2)
    trade = uj.trades_frame().iloc[0]
    assert trade["swap"] == -4.87
    assert uj.balance == 10_000 + trade["net_profit"]
    assert uj.balance == round(uj.balance, 2)


class _Pair(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        pass


def test_symbols_on_different_server_clocks_are_refused_by_name():
    """One account trades on one server: GBPUSD's candles on a UTC+2 clock beside EURUSD's on UTC would
    build its days, rollovers and D1 bars on one clock and book its swaps on the other."""
    from backtests.errors import SymbolsError

    frames = {
        "EURUSD": synthetic_candles("EURUSD", "H1", 100, seed=1),
        "GBPUSD": synthetic_candles("GBPUSD", "H1", 100, seed=2, clock=BrokerClock(2.0)),
    }
    with pytest.raises(SymbolsError, match=r"GBPUSD are on a \+2 server clock, those of EURUSD on UTC"):
        Backtest(frames, _Pair)


class _EarlyQuote(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        ticket = (
            self.buy(0.1, symbol="GBPUSD", sl_points=100) if not self.positions(symbol="GBPUSD") else None
        )
        self.seen.append((self.time_current, self.bid_of("GBPUSD"), self.ask_of("GBPUSD"), ticket))


def test_a_symbol_before_its_first_bar_quotes_nothing_not_its_first_open():
    """GBPUSD's history starts 50 hours after EURUSD's: before then it has no quote (MetaTrader's
    SymbolInfoDouble gives nothing for a symbol without ticks), never the open of its first bar, which lies
    in the future; a request there is refused as the market closed (10018)."""
    _EarlyQuote.seen = []
    eu = synthetic_candles("EURUSD", "H1", 200, seed=1)
    gb = synthetic_candles("GBPUSD", "H1", 200, seed=2)
    first = gb.index[50]
    gb = make_frame(gb.iloc[50:], gb.index[50:], gb.attrs["candles"])
    result = Backtest({"EURUSD": eu, "GBPUSD": gb}, _EarlyQuote).run()
    before = [(bid, ask, ticket) for now, bid, ask, ticket in _EarlyQuote.seen if now < first]
    assert before and all(np.isnan(bid) and np.isnan(ask) and ticket is None for bid, ask, ticket in before)
    at_first = next((bid, ask) for now, bid, ask, _ in _EarlyQuote.seen if now == first)
    assert at_first[0] == gb.at[first, "open"]
    rejected = pd.DataFrame(result.rejected)
    assert len(rejected) == len(before) and set(rejected["retcode"]) == {10018}
    assert result.trades["entry_time"].min() >= first


def _ohlc_minutes(symbol: str, start: pd.Timestamp, rows: list[tuple[float, float, float, float]]):
    """M1 candles from ``start``, one (open, high, low, close) per minute, no spread."""
    o, h, lo, c = (np.asarray(col, dtype=float) for col in zip(*rows, strict=True))
    index = pd.date_range(start, periods=len(rows), freq="min", tz="UTC")
    data = {"open": o, "high": h, "low": lo, "close": c, "spread": np.zeros(len(rows), dtype=np.int32)}
    return make_frame(data, index, CandleMeta(symbol, Timeframe.M1, 5))


def _merged_brokers(m1: dict, deposit: float):
    """One account over the symbols of ``m1`` on their H1 bars, each walking its own minutes."""
    hours = {s: resample(df, "H1") for s, df in m1.items()}
    columns = {
        s: (*(df[c].to_numpy() for c in ("open", "high", "low", "close")), np.zeros(len(df)), df.index)
        for s, df in hours.items()
    }
    brokers = open_brokers(
        columns, {s: BUILTIN[s] for s in m1}, AccountConfig(deposit=deposit, spread=0), UTC
    )
    for s, b in brokers.items():
        b.attach_path(M1Path(hours[s].index, m1[s], 1e-5, 0).for_run(None))
    return brokers


def _enter(brokers, t):
    firsts = [b.enter(t) for b in brokers.values()]
    for b, first in zip(brokers.values(), firsts, strict=True):
        b.open_checks(t, first)


_CRASH = 80  # minute 20 of the second hour


def _crash(price: float, to: float) -> list[tuple[float, float, float, float]]:
    """Flat minutes at ``price`` but one that opens there and falls to ``to`` by its close, and stays."""
    flat, low = (price,) * 4, (to,) * 4
    return [flat] * _CRASH + [(price, price, to, to)] + [low] * (179 - _CRASH)


def test_a_fill_never_values_another_symbol_at_the_close_of_the_same_minute():
    """A 4-lot EURUSD buy limit (margin 4,400) is reached at 01:20, the minute GBPUSD opens at 1.30000 and
    falls to 1.25000 by 01:20:59. At 01:20:00 the account holds 10,000 equity and 1,300 margin, so the
    limit fills; valued at GBPUSD's close of that minute it would have been refused for lack of money."""
    start = pd.Timestamp("2024-01-02", tz="UTC")
    eur = [(1.1,) * 4] * _CRASH + [(1.1, 1.1, 1.0995, 1.1)] + [(1.1,) * 4] * (179 - _CRASH)
    brokers = _merged_brokers(
        {
            "EURUSD": _ohlc_minutes("EURUSD", start, eur),
            "GBPUSD": _ohlc_minutes("GBPUSD", start, _crash(1.3, 1.25)),
        },
        10_000.0,
    )
    _enter(brokers, 0)
    brokers["GBPUSD"].order(+1, 1.0, None, None, 0, "")
    walk_bar(list(brokers.values()), 0)
    _enter(brokers, 1)
    brokers["EURUSD"].pending("buy_limit", 4.0, 1.0995, None, None, None, None, 0, "")
    walk_bar(list(brokers.values()), 1)
    orders = brokers["EURUSD"].orders_frame()
    limit = orders[orders["type"] == "buy_limit"].iloc[0]
    assert limit["state"] == "filled"
    assert [p.lots for p in brokers["EURUSD"].book.positions] == [4.0]


def test_a_stop_out_never_reads_another_symbols_later_price_in_the_same_minute():
    """Both symbols fall in the minute 01:20: EURUSD to 1.09000 (-1,000 on 1 lot), GBPUSD dips to
    1.29000 (-1,000) and closes back at 1.30000. Either dip alone leaves the margin level above 50% of the
    2,400 margin (a loss over 1,800 reaches it), and only one moment of that minute is known for both, its
    start: so nothing is stopped out. Reading EURUSD at its close while GBPUSD's minute is worked joins
    the two dips (-2,000) and stops out."""
    start = pd.Timestamp("2024-01-02", tz="UTC")
    gbp = [(1.3,) * 4] * _CRASH + [(1.3, 1.3, 1.29, 1.3)] + [(1.3,) * 4] * (179 - _CRASH)
    brokers = _merged_brokers(
        {
            "EURUSD": _ohlc_minutes("EURUSD", start, _crash(1.1, 1.09)),
            "GBPUSD": _ohlc_minutes("GBPUSD", start, gbp),
        },
        3_000.0,
    )
    _enter(brokers, 0)
    brokers["EURUSD"].order(+1, 1.0, None, None, 0, "")
    brokers["GBPUSD"].order(+1, 1.0, None, None, 0, "")
    walk_bar(list(brokers.values()), 0)
    _enter(brokers, 1)
    walk_bar(list(brokers.values()), 1)
    assert brokers["EURUSD"].trades_frame().empty
    assert [len(b.book.positions) for b in brokers.values()] == [1, 1]


class _HoldBoth(ExpertAdvisor):
    symbols = ("EURUSD", "USDJPY")

    def on_bar(self):
        for s in self.symbols:
            if not self.position_of(s):
                self.buy(0.1, symbol=s)


@pytest.mark.parametrize(
    ("setting", "value"),
    [("swap_long", -5.0), ("swap_short", 2.0), ("margin_hedged", 50_000.0), ("stops_level", 30),
     ("contract_size", 10_000.0), ("lot_step", 0.1)],
)  # fmt: skip
def test_an_account_swap_or_symbol_setting_a_multi_symbol_run_would_ignore_is_refused(setting, value):
    """A multi-symbol run takes each symbol's swaps, levels, volumes and contract size from its
    specification; an account setting of the same fact (``--swap-long -5``) used to be dropped silently, so
    positions held over many server midnights paid no swap while the report's settings said -5."""
    from dataclasses import replace

    from backtests.errors import SymbolsError

    frames = {
        s: synthetic_candles(bars=60, seed=i, symbol=s, start="2024-01-02")
        for i, s in enumerate(_HoldBoth.symbols)
    }
    account = replace(AccountConfig(), **{setting: value})
    with pytest.raises(SymbolsError, match=setting):
        Backtest(frames, _HoldBoth, account=account).run()


class _LateQuote(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        self.seen.append((self.time_current, self.bid_of("GBPUSD")))
        if self.time_current.hour == 1:
            self.buy(1.0, symbol="GBPUSD")


def test_ohlc1m_a_symbol_whose_minutes_of_the_bar_begin_later_quotes_its_last_close_at_the_bars_open():
    """EURUSD has every minute; GBPUSD stands at 1.30000 until 00:59 and has no minute again before 01:05,
    where it opens at 1.35000. At 01:00 MetaTrader's tester has given GBPUSD no tick since 00:59: its bid is
    1.30000 and a market buy fills there (then gains 0.05 x 100,000 = 5,000.00 by 01:05). Quoting 1.35000
    at 01:00 shows the EA a price five minutes ahead (a jump another symbol may follow) and fills a buy at
    a price that did not exist yet."""
    _LateQuote.seen = []
    start = pd.Timestamp("2024-01-02", tz="UTC")
    full = pd.date_range(start, periods=180, freq="min", tz="UTC")
    late = full[~((full.hour == 1) & (full.minute < 5))]
    eu = _ohlc_minutes("EURUSD", start, [(1.1,) * 4] * 180)
    gb = _ohlc_minutes("GBPUSD", start, [(1.3 if t.hour == 0 else 1.35,) * 4 for t in late])
    gb = make_frame(gb, late, gb.attrs["candles"])
    frames = {"EURUSD": resample(eu, "H1"), "GBPUSD": resample(gb, "H1")}
    result = Backtest(
        frames, _LateQuote, model="ohlc1m", m1={"EURUSD": eu, "GBPUSD": gb}, account=AccountConfig(spread=0)
    ).run()
    at_one = dict(_LateQuote.seen)[pd.Timestamp("2024-01-02 01:00", tz="UTC")]
    assert at_one == 1.3
    trade = result.trades.iloc[0]
    assert trade["entry_price"] == 1.3 and trade["profit"] == 5_000.0


class _BuyEurusd(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if not self.positions(symbol="EURUSD"):
            self.buy(1.0, symbol="EURUSD")


def test_a_multi_symbol_runs_equity_drawdown_counts_a_peak_inside_a_bar():
    """One lot of EURUSD bought at 1.10000 (no spread); the next bar rises to 1.11000 and closes back at
    1.10000: the equity peaks at 11,000.00 inside that bar and falls back to 10,000.00, a maximal equity
    drawdown of 1,000.00 (9.09 % of the peak), as the same trade gives on EURUSD alone. The other symbol
    of the account (GBPUSD, untouched) must change nothing; the multi-symbol run reported 0.00."""
    index = pd.date_range("2024-01-02", periods=5, freq="h", tz="UTC")

    def bars(symbol, rows):
        o, h, lo, c = (np.asarray(col, dtype=float) for col in zip(*rows, strict=True))
        data = {"open": o, "high": h, "low": lo, "close": c, "spread": np.zeros(len(rows), dtype=np.int32)}
        return make_frame(data, index, CandleMeta(symbol, Timeframe.H1, 5))

    flat = (1.1,) * 4
    eu = bars("EURUSD", [flat, (1.1, 1.11, 1.1, 1.1), flat, flat, flat])
    gb = bars("GBPUSD", [(1.3,) * 4] * 5)
    result = Backtest({"EURUSD": eu, "GBPUSD": gb}, _BuyEurusd, account=AccountConfig(spread=0)).run()
    assert result.stats["equity_drawdown_maximal"] == 1_000.0
    assert result.stats["equity_drawdown_maximal_pct"] == pytest.approx(100 * 1_000 / 11_000, abs=1e-6)
    assert result.equity_path is not None


class _OffGrid(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        self.seen.append((self.time_current, self.bid_of("GBPUSD")))


def test_a_symbols_bars_still_open_at_another_symbols_bar_are_refused_not_quoted_at_their_close():
    """GBPUSD's H1 bars stamped half an hour after EURUSD's (22:30, 23:30, ...): at EURUSD's bar of 23:00
    GBPUSD has none, and its newest bar, 22:30-23:30, is still open. Quoting its close there (1.10010,
    the price of 23:30) showed the EA, the account's equity and any conversion through GBPUSD a price half
    an hour ahead (and EURUSD's 22:00 bar the same way at 22:30). MetaTrader's bars of one timeframe start
    at the same whole periods of the server clock for every symbol, so such candles are refused by name
    before the run: the first bar still open where another begins."""
    from backtests.errors import SymbolsError

    _OffGrid.seen = []
    eu = synthetic_candles("EURUSD", "H1", 30, seed=1)
    g0 = synthetic_candles("GBPUSD", "H1", 30, seed=2)
    gb = make_frame(g0, g0.index + pd.Timedelta(minutes=30), g0.attrs["candles"])
    says = r"EURUSD: its bar 2020-01-01 22:00:00\+00:00 is still open at 2020-01-01 22:30:00\+00:00, where"
    with pytest.raises(SymbolsError, match=says + " GBPUSD"):
        Backtest({"EURUSD": eu, "GBPUSD": gb}, _OffGrid).run()
    assert not _OffGrid.seen


def test_a_symbol_missing_a_bar_on_the_same_grid_is_still_aligned():
    """The refusal above is for bars still open, not for a gap: GBPUSD without its 01:00 bar quotes the
    close of its 00:00 bar (closed at 01:00) there, and the run goes on."""
    _OffGrid.seen = []
    eu = synthetic_candles("EURUSD", "H1", 30, seed=1)
    g0 = synthetic_candles("GBPUSD", "H1", 30, seed=2)
    gap = g0.index[3]
    gb = make_frame(g0.drop(index=gap), g0.index.drop(gap), g0.attrs["candles"])
    Backtest({"EURUSD": eu, "GBPUSD": gb}, _OffGrid).run()
    assert dict(_OffGrid.seen)[gap] == g0["close"].iloc[2]


class _OneOfTwo(ExpertAdvisor):
    """Trades EURUSD only, with stops, beside a declared GBPUSD it never touches."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        bars = self.data("EURUSD")
        if len(bars) < 2 or self.position_of("EURUSD"):
            return
        up = bars.close[-1] > bars.close[-2]
        (self.buy if up else self.sell)(1.0, symbol="EURUSD", sl_points=200, tp_points=300)


class _OneAlone(_OneOfTwo):
    symbols = ("EURUSD",)


@pytest.mark.parametrize("hedging", [False, True])
def test_an_account_path_of_one_traded_symbol_gives_the_single_symbol_runs_drawdowns(hedging):
    """The account's equity at every modelled price, with a second symbol that holds nothing, is the one
    symbol's path: every equity drawdown MetaTrader reports equals the single-symbol run's."""
    eu = synthetic_candles("EURUSD", "H1", 1500, seed=4)
    gb = synthetic_candles("GBPUSD", "H1", 1500, seed=5)
    account = AccountConfig(hedging=hedging)
    multi = Backtest({"EURUSD": eu, "GBPUSD": gb}, _OneOfTwo, account=account, forward=None).run()
    single = Backtest(eu, _OneAlone, account=account, forward=None).run()
    assert len(multi.trades) == len(single.trades) > 100
    keys = [k for k in single.stats.index if k.startswith("equity_drawdown")]
    assert len(keys) >= 4
    for k in keys:
        assert multi.stats[k] == pytest.approx(single.stats[k], abs=1e-6), k


class _CloseGbp(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD", sl=1.29)
        elif len(self.bars) == 2:
            self.seen.append(len(self.positions(symbol="GBPUSD")))
            self.close(symbol="GBPUSD")


def test_ohlc1m_a_stop_reached_before_the_main_symbols_first_minute_closes_before_the_decision():
    """EURUSD has no minute from 02:00 to 02:04, so the EA decides at 02:05; GBPUSD (long 1 lot, SL 1.29000)
    falls to 1.28000 in its minute 02:02. The stop was reached before the decision: the position is closed
    there (at the SL, the minute passing through it: -1,000.00) and the EA finds it gone, not open to be
    closed at the decision's price (-2,000.00)."""
    _CloseGbp.seen = []
    start = pd.Timestamp("2024-01-02", tz="UTC")
    full = pd.date_range(start, periods=240, freq="min", tz="UTC")
    kept = full[~((full.hour == 2) & (full.minute < 5))]
    eu = _ohlc_minutes("EURUSD", start, [(1.1,) * 4] * len(kept))
    eu = make_frame(eu, kept, eu.attrs["candles"])
    gbp = [(1.3,) * 4] * 122 + [(1.3, 1.3, 1.28, 1.28)] + [(1.28,) * 4] * 117
    gb = _ohlc_minutes("GBPUSD", start, gbp)
    frames = {"EURUSD": resample(eu, "H1"), "GBPUSD": resample(gb, "H1")}
    result = Backtest(
        frames, _CloseGbp, model="ohlc1m", m1={"EURUSD": eu, "GBPUSD": gb}, account=AccountConfig(spread=0),
        forward=None,
    ).run()  # fmt: skip
    assert _CloseGbp.seen == [0]
    trade = result.trades.iloc[0]
    assert trade["exit_reason"] == "sl" and trade["exit_price"] == 1.29
    assert trade["exit_time"] == start + pd.Timedelta(hours=2, minutes=2)
    assert trade["profit"] == -1_000.0
