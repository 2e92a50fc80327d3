"""Attacks on the fast replay: what its screens skip must be what a walk of every price would find nothing
in, its caches must hand out only what the run would compute, and its curves and statistics must be those
of the trades, on data a user can give.

- The 1 minute OHLC walk passes over minutes whose prices cannot reach a level (``M1Path.next_touch``).
  Bids move continuously from one minute's close to the next one's open, but the ask is the bid plus each
  minute's own spread: where the spread narrows, the ask falls through a buy limit or a short's take-profit
  while the bids stay where they were. Those minutes must be worked, as MetaTrader's tester works each
  tick of the minutes it generates, within a bar and from the bar before.
- The account's screen of a bar bounds a short's worst by the bar's high at the widest spread of its
  minutes or ticks, not the bar's own: a spread that widens inside the bar can stop the account out, and
  the worst-equity curve and the lowest margin level see it.
- The indicator cache keys a function by what its code reads; a name read from a string is not known.
- A Backtest trades the candles it was made with; later writes to the caller's frame change no run.
- The report's statistics of a few trades, by hand, through the public Backtest.
"""

from __future__ import annotations

import operator
import types

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.indicator_cache import PROVEN
from datafeeds import read_sample
from datafeeds.candles import CandleMeta, make_frame
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor
from strategies.indicators import sma
from strategies.sma import SmaCrossEA


def _ticks(symbol: str, rows: list[tuple[str, float, int]]) -> pd.DataFrame:
    """Ticks of ``symbol`` (5 digits) from (UTC time, bid, spread in points)."""
    ns = np.array([pd.Timestamp(t, tz="UTC").value for t, _, _ in rows], dtype=np.int64)
    bid = np.array([b for _, b, _ in rows])
    ask = np.round(bid + np.array([s for _, _, s in rows]) * 1e-5, 5)
    return make_ticks(ns, bid, ask, TickMeta(symbol, 5, f"{symbol}.csv"))


# One minute at a wide spread, the next at none: the ask falls from 1.10500 to 1.10300 at 11:02, the bid
# stays at 1.10300.
NARROWING = _ticks(
    "EURUSD",
    [
        ("2024-01-02 10:00", 1.10500, 10),
        ("2024-01-02 11:00", 1.10500, 10),  # the decision: bid 1.10500, ask 1.10510
        ("2024-01-02 11:01", 1.10300, 200),  # ask 1.10500
        ("2024-01-02 11:02", 1.10300, 0),  # ask 1.10300
        ("2024-01-02 11:03", 1.10600, 10),
        ("2024-01-02 12:00", 1.10800, 10),
    ],
)
# A second symbol with minutes of its own in the same bar: the several-symbol walk of the same minutes
OTHER = _ticks(
    "GBPUSD",
    [(f"2024-01-02 {h}:{m:02d}", 1.27000 + 0.00001 * m, 5) for h in (10, 11, 12) for m in range(0, 60, 7)],
)


class SellWithTakeProfit(ExpertAdvisor):
    """At bar 1's open: a short of one lot with its take-profit 100 points below (1.10400); with several
    symbols, a long GBPUSD held beside it (the account's minutes are then worked together)."""

    def on_bar(self) -> None:
        if len(self.bars) == 1:
            if "GBPUSD" in self.symbols:
                self.buy(0.1, symbol="GBPUSD")
            self.sell(1.0, tp_points=100, symbol="EURUSD")


class BuyLimitBelow(ExpertAdvisor):
    """At bar 1's open: a buy limit of one lot at 1.10400, under the ask of 1.10510."""

    def on_bar(self) -> None:
        if len(self.bars) == 1:
            self.buy_limit(1.0, 1.10400, symbol="EURUSD")


def _run(ea: type[ExpertAdvisor], model: str, several: bool = False):
    symbols = {"EURUSD": NARROWING, "GBPUSD": OTHER} if several else {"EURUSD": NARROWING}
    if several:
        ea = type(ea.__name__, (ea,), {"symbols": ("EURUSD", "GBPUSD")})
    h1 = {s: bars_from_ticks(t, "H1") for s, t in symbols.items()}
    fine = (
        {"ticks": symbols}
        if model == "ticks"
        else {"m1": {s: bars_from_ticks(t, "M1") for s, t in symbols.items()}}
    )
    if not several:
        h1, fine = h1["EURUSD"], {k: v["EURUSD"] for k, v in fine.items()}
    return Backtest(h1, ea, model=model, forward=None, account=AccountConfig(deposit=10_000.0), **fine).run()


@pytest.mark.parametrize("several", [False, True], ids=["one symbol", "two symbols"])
@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_narrowing_spread_reaches_a_shorts_take_profit_inside_the_bar(model, several):
    """Sold 1 lot at 1.10500 with its TP at 1.10400. At 11:02 the ask opens at 1.10300, through the TP: it
    fills there (a limit gapped through fills at the better price), +200.00 USD. The minute walk searched
    from 11:02 with 11:02's spread alone, found no level inside the bids' range 1.10300..1.10300 widened by
    0 points, skipped it, and kept the short to the end of the test: -310.00 USD at 1.10810."""
    trades = _run(SellWithTakeProfit, model, several).trades
    short = trades[trades["symbol"] == "EURUSD"].iloc[0]
    assert (short["exit_reason"], short["exit_time"]) == ("tp", pd.Timestamp("2024-01-02 11:02", tz="UTC"))
    assert (short["exit_price"], short["net_profit"]) == (1.103, 200.0)


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_narrowing_spread_fills_a_buy_limit_inside_the_bar(model):
    """A buy limit at 1.10400: at 11:01 the ask is 1.10500 (no fill), at 11:02 it opens at 1.10300 and the
    limit fills there; the long ends the test at the bid 1.10800: +500.00 USD. The minute walk never worked
    11:02 and the order was still pending at the end (no trade)."""
    trades = _run(BuyLimitBelow, model).trades
    assert len(trades) == 1
    long_ = trades.iloc[0]
    assert (long_["entry_time"], long_["entry_price"]) == (pd.Timestamp("2024-01-02 11:02", tz="UTC"), 1.103)
    assert long_["net_profit"] == 500.0


def _sample(n: int = 3000) -> pd.DataFrame:
    base = read_sample()
    df = base.iloc[:n].copy()
    df.attrs = base.attrs
    return df


def _change_in_place(df: pd.DataFrame) -> None:
    """The caller's frame, the same object, given other prices (on the grid): a wave of 100 points."""
    wave = np.round(0.01 * np.sin(np.arange(len(df)) / 37.0), 5)
    for c in ("open", "high", "low", "close"):
        df.loc[:, c] = np.round(df[c].to_numpy() + wave, 5)


def _money(result) -> tuple:
    return len(result.trades), float(result.stats["total_net_profit"]), result.trades["net_profit"].tolist()


@pytest.mark.parametrize("several", [False, True], ids=["one symbol", "mapping of symbols"])
def test_candles_changed_in_place_after_the_backtest_was_made_change_none_of_its_runs(several):
    """SmaCrossEA 5/12 on 3,000 sample bars: 273 trades, +3,202.00 USD. With the caller's frame changed in
    place between two runs, the several-symbol path showed the EA the new bars (198 trades, as the new data
    gives) and filled them at the old prices, aligned once when the Backtest was made: +1,224.00 USD, the
    money of neither data (the new data alone makes +30,556.00). Every run now trades the candles the
    Backtest was made with."""
    df = _sample()
    bt = Backtest(
        {"EURUSD": df} if several else df, SmaCrossEA, account=AccountConfig(deposit=10_000.0), forward=None
    )
    first = bt.run(fast=5, slow=12)
    _change_in_place(df)
    again = bt.run(fast=5, slow=12)
    assert _money(again) == _money(first)
    assert _money(first)[:2] == (273, 3202.0)
    fresh = Backtest(df, SmaCrossEA, account=AccountConfig(deposit=10_000.0), forward=None).run(
        fast=5, slow=12
    )
    assert _money(fresh)[:2] == (198, 30556.0)  # the new prices are a different market: the test can fail


def test_candles_changed_in_place_do_not_leave_their_minutes_behind():
    """1 minute OHLC: the minutes are grouped and checked against the bars once, when the Backtest is made.
    Bars changed in place afterwards (50 to 150 points higher: no minute lies inside them) are refused by a
    new Backtest; the held one traded them: 5 trades, -529.00 USD, deciding on bars its fills never saw
    (its first run, on the data it was made with: 3 trades, +25.00 USD)."""
    ticks = _ticks("EURUSD", [(f"2024-01-02 {h:02d}:{m:02d}", 1.10500 + 0.00011 * ((h * 7 + m) % 13), 10)
                              for h in range(24) for m in range(0, 60, 3)])  # fmt: skip
    h1, m1 = bars_from_ticks(ticks, "H1"), bars_from_ticks(ticks, "M1")
    account = AccountConfig(deposit=10_000.0)
    bt = Backtest(h1, SmaCrossEA, model="ohlc1m", m1=m1, account=account, forward=None)
    first = bt.run(fast=2, slow=4)
    lift = np.round(0.001 + 0.0005 * np.sin(np.arange(len(h1))), 5)  # other crosses, above every minute
    for c in ("open", "high", "low", "close"):
        h1.loc[:, c] = np.round(h1[c].to_numpy() + lift, 5)
    with pytest.raises(Exception, match="M1"):
        Backtest(h1, SmaCrossEA, model="ohlc1m", m1=m1, account=account, forward=None)
    assert _money(bt.run(fast=2, slow=4)) == _money(first)


def _frames(symbols: dict[str, pd.DataFrame], model: str) -> tuple[dict, dict]:
    h1 = {s: bars_from_ticks(t, "H1") for s, t in symbols.items()}
    if model == "ticks":
        return h1, {"ticks": symbols}
    return h1, {"m1": {s: bars_from_ticks(t, "M1") for s, t in symbols.items()}}


class LimitOnTheLateSymbol(ExpertAdvisor):
    """At bar 1's open (10:00): a GBPUSD buy limit of one lot at 1.27200 (ask 1.27255)."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self) -> None:
        if len(self.bars) == 1:
            self.buy_limit(1.0, 1.27200, symbol="GBPUSD")


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_late_symbols_first_minute_fills_a_limit_that_a_narrowing_spread_passed(model):
    """GBPUSD closes the 10:00 bar at bid 1.27000 with a spread of 300 points (ask 1.27300, above the limit)
    and has its first minute of the 11:00 bar at 11:05, ask 1.27005: the limit fills there, at the better
    price, and ends the test at 1.27100: +95.00 USD. The symbol's opening (at its close before the bar,
    since its first minute comes after the EA's decision) found nothing, and the search of the bar's minutes
    widened the bar's prices by the bar's own spreads only, found 1.27200 outside them and skipped the bar:
    the order filled at 12:00 at 1.27105, -5.00 USD."""
    eurusd = _ticks(
        "EURUSD", [(f"2024-01-02 {h}:{m:02d}", 1.10000, 10) for h in (9, 10, 11, 12) for m in (0, 30)]
    )
    gbpusd = _ticks(
        "GBPUSD",
        [
            ("2024-01-02 09:00", 1.27250, 5),
            ("2024-01-02 10:00", 1.27250, 5),
            ("2024-01-02 10:59", 1.27000, 300),
            ("2024-01-02 11:05", 1.27000, 5),
            ("2024-01-02 11:40", 1.27050, 5),
            ("2024-01-02 12:00", 1.27100, 5),
        ],
    )
    h1, fine = _frames({"EURUSD": eurusd, "GBPUSD": gbpusd}, model)
    bt = Backtest(
        h1, LimitOnTheLateSymbol, model=model, forward=None, account=AccountConfig(deposit=10_000.0), **fine
    )
    (trade,) = bt.run().trades.itertuples()
    assert (trade.entry_time, trade.entry_price) == (pd.Timestamp("2024-01-02 11:05", tz="UTC"), 1.27005)
    assert trade.net_profit == 95.0


class ShortHalfLot(ExpertAdvisor):
    """At bar 1's open: a short of 0.5 lot of EURUSD at 1.10000 (margin 550.00 of a 1,000.00 deposit)."""

    def on_bar(self) -> None:
        if len(self.bars) == 1:
            self.sell(0.5, symbol="EURUSD")


@pytest.mark.parametrize("several", [False, True], ids=["one symbol", "two symbols"])
@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_spread_wider_inside_the_bar_than_at_its_ends_stops_the_account_out(model, several):
    """The bid stays at 1.10000; at 11:30 the spread alone widens to 1,600 points (ask 1.11600): the short
    loses 800.00, the equity (200.00) falls below half the margin (275.00) and the position is stopped out
    there: -800.00 USD. With a second symbol on the account, the account's screen of the bar valued the
    short at the bar's high plus the spread of its first and last minute or tick (10 points), ruled the
    stop-out out and the short ran to the end of the test: -5.00 USD."""
    eurusd = _ticks(
        "EURUSD",
        [
            ("2024-01-02 10:00", 1.10000, 10),
            ("2024-01-02 11:00", 1.10000, 10),
            ("2024-01-02 11:20", 1.10000, 10),
            ("2024-01-02 11:30", 1.10000, 1600),
            ("2024-01-02 11:31", 1.10000, 10),
            ("2024-01-02 12:00", 1.10000, 10),
        ],
    )
    symbols = {"EURUSD": eurusd, "GBPUSD": OTHER} if several else {"EURUSD": eurusd}
    h1, fine = _frames(symbols, model)
    ea = type("ShortHalfLot", (ShortHalfLot,), {"symbols": tuple(symbols)})
    if not several:
        h1, fine = h1["EURUSD"], {k: v["EURUSD"] for k, v in fine.items()}
    account = AccountConfig(deposit=1_000.0, leverage=100.0, stop_out_level=50.0)
    (trade,) = Backtest(h1, ea, model=model, forward=None, account=account, **fine).run().trades.itertuples()
    assert (trade.exit_reason, trade.exit_time) == ("stop out", pd.Timestamp("2024-01-02 11:30", tz="UTC"))
    assert (trade.exit_price, trade.net_profit) == (1.116, -800.0)


# A module of the user's, whose setting the EA writes and its indicator reads: by a name in a string
settings = types.ModuleType("fast_replay_settings")
settings.period = 5


class SettingByName(ExpertAdvisor):
    """Buys (with stops) while an SMA of ``period`` bars rises; the SMA's period is read from ``settings``
    through its namespace (``read``: ``settings.__dict__["period"]`` or ``attrgetter("period")``)."""

    period: int = 5
    read: str = "dict"

    def on_init(self) -> None:
        settings.period = self.period
        if self.read == "dict":
            self.line = self.indicator(lambda b: sma(b.close, settings.__dict__["period"]), "sma")
        else:
            self.line = self.indicator(lambda b: sma(b.close, operator.attrgetter("period")(settings)), "sma")

    def on_bar(self) -> None:
        if len(self.bars) > 2 and not self.positions() and self.line[-1] > self.line[-2]:
            self.buy(1.0, sl_points=200, tp_points=200)


@pytest.mark.parametrize("read", ["dict", "attrgetter"])
def test_an_indicator_reading_a_setting_by_a_name_in_a_string_is_not_handed_another_runs_values(read):
    """The indicator cache keys a function by what its code reads; a module's attribute read through
    ``__dict__[...]`` or ``operator.attrgetter(...)`` is named only in a string. A run with period 40 after
    one with period 5 was handed the period-5 SMA: 250 trades and +2,239.00 USD, where period 40 makes
    242 trades and +101.00 USD. Such a function is now evaluated and proved in every run."""
    bt = Backtest(_sample(2000), SettingByName, account=AccountConfig(deposit=10_000.0), forward=None)
    PROVEN.clear()
    bt.run(period=5, read=read)
    after = bt.run(period=40, read=read)
    PROVEN.clear()
    alone = bt.run(period=40, read=read)
    assert _money(after) == _money(alone)
    assert _money(alone)[:2] == (242, 101.0)


SPIKE = _ticks(
    "EURUSD",
    [
        ("2024-01-02 10:00", 1.10000, 10),
        ("2024-01-02 11:00", 1.10000, 10),
        ("2024-01-02 11:20", 1.10000, 10),
        ("2024-01-02 11:30", 1.10000, 1600),
        ("2024-01-02 11:31", 1.10000, 10),
        ("2024-01-02 12:00", 1.10000, 10),
    ],
)


class ShortTenthThenClose(ExpertAdvisor):
    """A short of 0.1 lot at bar 1's open; closed at bar ``close_at``'s open (0: held to the end)."""

    close_at: int = 0

    def on_bar(self) -> None:
        if len(self.bars) == 1:
            self.sell(0.1)
        elif len(self.bars) == self.close_at:
            self.close()


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_the_worst_equity_of_a_bar_meets_a_spread_wider_inside_it(model):
    """0.1 lot short at 1.10000 (margin 110.00); at 11:30 the ask alone reaches 1.11600: the equity there is
    1,000.00 - 1.00 of spread paid - 159.00 = 840.00, as ``equity_path`` has it. ``equity_worst`` (the
    positions at the bar's worst prices: shorts at its highest ask) valued the short at the bar's high plus
    its own spread: 999.00, and the lowest margin level was 908.18 % instead of 763.64 %."""
    fine = {"ticks": SPIKE} if model == "ticks" else {"m1": bars_from_ticks(SPIKE, "M1")}
    account = AccountConfig(deposit=1_000.0, leverage=100.0)
    result = Backtest(
        bars_from_ticks(SPIKE, "H1"), ShortTenthThenClose, model=model, forward=None, account=account, **fine
    ).run()
    assert result.equity_path["equity"].min() == pytest.approx(840.0, abs=1e-6)
    assert result.curves["equity_worst"].min() == pytest.approx(840.0, abs=1e-6)  # sums of floats
    assert result.stats["margin_level_min_pct"] == 763.64


def test_a_short_closed_at_the_open_has_no_excursion_after_its_close():
    """1 minute OHLC on bars carrying their lowest spread (5 points, as MetaTrader's do) where the first
    minute of the 12:00 bar has 30: the short is closed at that bar's open, at its ask 1.10030 (-3.00).
    The worst-equity curve took the close for one inside the bar (the open's ask at the bar's own spread,
    1.10005, is not the exit) and charged the bar's later high ask, 1.10205: 979.50 instead of 997.00."""
    ticks = _ticks(
        "EURUSD",
        [
            ("2024-01-02 10:00", 1.10000, 10),
            ("2024-01-02 11:00", 1.10000, 10),
            ("2024-01-02 11:30", 1.10000, 10),
            ("2024-01-02 12:00", 1.10000, 30),
            ("2024-01-02 12:10", 1.10200, 30),
            ("2024-01-02 12:20", 1.10000, 30),
            ("2024-01-02 13:00", 1.10000, 10),
        ],
    )
    h1 = bars_from_ticks(ticks, "H1")
    h1["spread"] = np.full(len(h1), 5, dtype=h1["spread"].dtype)
    account = AccountConfig(deposit=1_000.0, leverage=100.0)
    bt = Backtest(
        h1,
        ShortTenthThenClose,
        model="ohlc1m",
        m1=bars_from_ticks(ticks, "M1"),
        forward=None,
        account=account,
    )
    result = bt.run(close_at=2)
    (trade,) = result.trades.itertuples()
    assert (trade.exit_time, trade.exit_price, trade.net_profit) == (
        pd.Timestamp("2024-01-02 12:00", tz="UTC"),
        1.1003,
        -3.0,
    )
    assert result.curves["equity_worst"].tolist() == pytest.approx([1000.0, 999.0, 997.0, 997.0], abs=1e-6)


class ThreeTrades(ExpertAdvisor):
    """A long of bars 1-3, a short of bars 4-6, a long of bars 7-9, one lot each."""

    def on_bar(self) -> None:
        n = len(self.bars)
        if n in (1, 7):
            self.buy(1.0)
        elif n == 4:
            self.sell(1.0)
        elif n in (3, 6, 9):
            self.close()


def test_the_reports_statistics_of_three_trades_by_hand():
    """+100.00, -50.00, +30.00 on 10,000.00 (no spread, no commission), through the public Backtest and
    its curves computed from position steps. By hand: profit factor 130 / 50 = 2.6; expected payoff
    80 / 3; balance 10,000 -> 10,100 -> 10,050 -> 10,080, so the balance drawdown maximal is 50.00
    (0.49505 % of 10,100) and the recovery factor 80 / 50 = 1.6; the HPRs 1.01, 10,050 / 10,100 and
    10,080 / 10,050 give AHPR 1.0026782, GHPR 1.008^(1/3) = 1.0026596 and the Sharpe ratio
    (AHPR - 1) / their standard deviation = 0.438518; the runs test of W L W: Z = (3 * 2.5 - 4) / √(4 * 1
    / 2) = 2.4749; the balance graph 10,000, 10,100, 10,050, 10,080 against x = 0..3: correlation 95 /
    √(5 * 5,675) = 0.56397, residuals -29, 52, -17, -6 about its line: √(3,870 / 2) = 43.988635;
    SQN √3 * 26.67 / 75.06 = 0.6154."""
    opens = np.array([1.1, 1.1, 1.1005, 1.101, 1.101, 1.1012, 1.1015, 1.1015, 1.1016, 1.1018, 1.1018])
    closes = np.append(opens[1:], opens[-1])
    frame = make_frame(
        {"open": opens, "high": np.maximum(opens, closes), "low": np.minimum(opens, closes), "close": closes},
        pd.date_range("2024-01-02", periods=len(opens), freq="h", tz="UTC"),
        CandleMeta("EURUSD", Timeframe.parse("H1"), 5),
    )
    result = Backtest(
        frame, ThreeTrades, account=AccountConfig(deposit=10_000.0, spread=0), forward=None
    ).run()
    assert result.trades["net_profit"].tolist() == [100.0, -50.0, 30.0]
    hand = {
        "total_net_profit": 80.0,
        "profit_factor": 2.6,
        "expected_payoff": 26.666667,
        "recovery_factor": 1.6,
        "balance_drawdown_maximal": 50.0,
        "balance_drawdown_maximal_pct": 0.49505,
        "equity_drawdown_maximal": 50.0,
        "ahpr": 1.002678,
        "ghpr": 1.00266,
        "sharpe_ratio": 0.438518,
        "z_score": 2.4749,
        "lr_correlation": 0.56397,
        "lr_standard_error": 43.988635,
        "sqn": 0.6154,
    }
    assert {k: result.stats[k] for k in hand} == hand


SEEN: list[float] = []  # what SpreadSum's line showed at each bar


class SpreadSum(ExpertAdvisor):
    """Keeps the value its line of summed spreads shows (the indicator cache shares such lines)."""

    def on_init(self) -> None:
        self.line = self.indicator(lambda b: np.cumsum(b.spread), "spreads")

    def on_bar(self) -> None:
        SEEN.append(self.line[-1])


def test_two_backtests_on_data_of_one_length_differing_in_one_bars_spread_see_their_own_lines():
    """The indicator cache keys values by the bars' content: a frame of the same length, times and prices
    whose one bar carries another spread (+25 points at bar 100) must be given its own line, in either
    order and after the other's values were kept."""
    a = _sample(400)
    b = a.copy()
    b.attrs = a.attrs
    b.iloc[100, b.columns.get_loc("spread")] += 25
    PROVEN.clear()
    ends = []
    for frame in (a, b, a, b):
        SEEN.clear()
        Backtest(frame, SpreadSum, account=AccountConfig(deposit=10_000.0), forward=None).run()
        ends.append(SEEN[-1])
    assert ends[1] == ends[0] + 25 and ends[2:] == ends[:2]
    assert PROVEN.hits >= 2  # the second pair was served from the cache
