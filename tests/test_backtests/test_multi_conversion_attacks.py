"""Hostile cases of a profit converted through another symbol that moves inside the bar: the stop-out of
``ohlc1m`` and ``ticks`` runs reads the converting pair's price of the moment, whatever bounds the walks
take to skip the quiet parts of a bar."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds.resample import resample
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor
from tests.flat_candles import T0, Bar, flat_frame

H = 3600
# 1 lot of EURGBP bought at 0.85 on a 2,000 USD account, leverage 100: margin 100,000 EUR / 100 at
# EURUSD's 1.10 = 1,100 USD, stop-out at 50 % = 550 USD of equity. In the third hour GBPUSD jumps from
# 1.30 to 1.60 and EURGBP then dips 1,000 points before both come back: read at GBPUSD's 1.30 of the bar's
# open the dip would leave 2,000 - 1,300 = 700 USD (no stop-out), read at its 1.60 of that moment it leaves
# 400 USD: MetaTrader stops the position out there.
ACCOUNT = AccountConfig(deposit=2_000.0, spread=0, leverage=100.0, stop_out_level=50.0)


class _Cross(ExpertAdvisor):
    """1 lot of EURGBP at the second bar: its pounds converted through GBPUSD, its euro margin through
    EURUSD."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")


class _CrossAndEurusd(_Cross):
    """The same, with 0.01 lot of EURUSD held too: the symbols' minutes are walked together."""

    symbols = ("EURGBP", "EURUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")
            self.buy(0.01, symbol="EURUSD")


def _ticks(symbol: str, rows: list[tuple[float, float]]) -> pd.DataFrame:
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


def _minutes(symbol: str, base: float, special: dict[int, Bar]) -> pd.DataFrame:
    """Four hours of flat M1 bars at ``base``, minute i replaced by ``special[i]`` (o, h, l, c)."""
    return flat_frame(symbol, base, special, 240, Timeframe.M1)


def _run_ticks(eurgbp_dips_at: int, gbpusd_jumps_at: int):
    """Four hours of ticks: EURGBP at 0.85 dips to 0.84 at second ``eurgbp_dips_at`` and is back at
    2 h 40 s; GBPUSD at 1.30 jumps to 1.60 at second ``gbpusd_jumps_at`` and is back at 2 h 50 s; EURUSD
    flat at 1.10. The ``_Cross`` EA run on them, ``ticks`` model."""
    flat = (0, H, 2 * H)  # each symbol at its base these seconds
    rows = {
        "EURGBP": [(s, 0.85) for s in flat] + [(eurgbp_dips_at, 0.84), (2 * H + 40, 0.85), (4 * H - 1, 0.85)],
        "GBPUSD": [(s, 1.3) for s in flat] + [(gbpusd_jumps_at, 1.6), (2 * H + 50, 1.3), (4 * H - 1, 1.3)],
        "EURUSD": [(s, 1.1) for s in flat] + [(3 * H, 1.1), (4 * H - 1, 1.1)],
    }
    ticks = {s: _ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    return Backtest(frames, _Cross, model="ticks", ticks=ticks, account=ACCOUNT, forward=None).run()


# EURGBP's 02:01 minute dips to 0.84; GBPUSD's 02:00 minute rises from 1.30 to 1.60, its 02:01 opens there.
_EURGBP_DIPS_AT_0201 = {121: (0.85, 0.85, 0.84, 0.85)}
_GBPUSD_RISES_AT_0200 = {120: (1.3, 1.6, 1.3, 1.6), 121: (1.6, 1.6, 1.3, 1.3)}


def _run_m1(ea, eurgbp: dict, gbpusd: dict, account: AccountConfig = ACCOUNT):
    """Four hours of M1 bars, EURGBP at 0.85 and GBPUSD at 1.30 but for their ``special`` minutes, EURUSD
    flat at 1.10, resampled to H1; ``ea`` run on them, ``ohlc1m`` model."""
    m1 = {
        "EURGBP": _minutes("EURGBP", 0.85, eurgbp),
        "GBPUSD": _minutes("GBPUSD", 1.3, gbpusd),
        "EURUSD": _minutes("EURUSD", 1.1, {}),
    }
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    return Backtest(frames, ea, model="ohlc1m", m1=m1, account=account, forward=None).run()


def test_ticks_a_stop_out_is_not_ruled_out_by_the_converting_pairs_price_at_the_bars_open():
    """GBPUSD at 1.60 from 02:00:10, EURGBP at 0.84 at 02:00:20 (-1,000 GBP): -1,600 USD, equity 400 below
    the 550 of the stop-out: stopped out there at 0.84, booked -1,000 x 1.60 (a loss at GBPUSD's ask, spread
    0) = -1,600.00. The walk's bound had converted the dip at GBPUSD's 1.30 and skipped every tick."""
    result = _run_ticks(eurgbp_dips_at=2 * H + 20, gbpusd_jumps_at=2 * H + 10)
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", T0 + pd.Timedelta(seconds=2 * H + 20))
    assert trade["exit_price"] == pytest.approx(0.84) and trade["profit"] == -1600.00


@pytest.mark.parametrize(
    ("ea", "price", "profit"),
    [(_Cross, 0.84093, -1451.20), (_CrossAndEurusd, 0.84097, -1444.80)],
    ids=["EURGBP alone", "with EURUSD"],
)
def test_ohlc1m_a_stop_out_reads_the_converting_pairs_minute_not_its_bars_open(ea, price, profit):
    """GBPUSD's 02:00 minute rises from 1.30 to 1.60, EURGBP's 02:01 minute dips to 0.84 while GBPUSD opens
    its 02:01 minute at 1.60. Alone, the level is reached at 2,000 - 1.60 x 100,000 x (0.85 - p) = 550,
    p = 0.8409375: the first whole point beyond it is 0.84093, a loss of 907 GBP x 1.60 = -1,451.20 USD.
    With 0.01 lot of EURUSD (11 USD more margin, flat) the level is 555.50: p = 0.840971875, filled at
    0.84097, 903 GBP x 1.60 = -1,444.80. EURGBP alone was walked as one symbol with GBPUSD at its bar's
    open all hour, and with EURUSD the bar's bound converted the dip at that open: no stop-out either way."""
    result = _run_m1(ea, _EURGBP_DIPS_AT_0201, _GBPUSD_RISES_AT_0200)
    trade = result.trades[result.trades["symbol"] == "EURGBP"].iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", T0 + pd.Timedelta(minutes=121))
    assert trade["exit_price"] == pytest.approx(price) and trade["profit"] == profit


class _CrossWithStop(ExpertAdvisor):
    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP", sl=0.84)


def test_ohlc1m_a_stop_loss_of_a_lone_symbol_is_converted_at_the_pairs_price_of_that_minute():
    """EURGBP's stop-loss at 0.84 is reached in its 02:01 minute, when GBPUSD stands at 1.60 (its 02:01
    open, after its 02:00 minute rose from 1.30): -1,000 GBP x 1.60 = -1,600.00 USD. EURGBP walked alone
    converted it at GBPUSD's 1.30 of the bar's open: -1,300.00, 300 dollars in the EA's favour."""
    result = _run_m1(
        _CrossWithStop,
        _EURGBP_DIPS_AT_0201,
        _GBPUSD_RISES_AT_0200,
        AccountConfig(deposit=100_000.0, spread=0, leverage=100.0),
    )
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("sl", T0 + pd.Timedelta(minutes=121))
    assert trade["exit_price"] == pytest.approx(0.84) and trade["profit"] == -1600.00


def test_ticks_a_move_of_the_converting_pair_alone_stops_the_position_out_at_that_tick():
    """EURGBP dips to 0.84 at 02:00:10 (-1,000 GBP at GBPUSD's 1.30: equity 700, above the 550 of the
    stop-out) and stands there; GBPUSD jumps to 1.60 at 02:00:20: -1,600 USD, equity 400, so the position
    is stopped out at that tick at EURGBP's 0.84: -1,600.00. Both come back before the hour ends. A tick of
    a symbol without positions checked nothing, and EURGBP's own next tick (0.85) no longer lost: the run
    ended flat at 0.00."""
    result = _run_ticks(eurgbp_dips_at=2 * H + 10, gbpusd_jumps_at=2 * H + 20)
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", T0 + pd.Timedelta(seconds=2 * H + 20))
    assert trade["exit_price"] == pytest.approx(0.84) and trade["profit"] == -1600.00


def test_ohlc1m_a_move_of_the_converting_pair_alone_stops_the_position_out_at_its_minutes_price():
    """EURGBP's 02:00 minute ends at 0.84 and its 02:01 minute opens there; GBPUSD's 02:01 minute is a bull
    minute 1.30 -> 1.30 -> 1.60 -> 1.60 (MetaTrader's four ticks of a 1-minute OHLC minute). At its 1.60 the
    pounds lost cost 1,600 USD (equity 400 < 550): EURGBP is stopped out at the 0.84 it stands at,
    -1,600.00. The minute of a symbol without positions checked nothing: the run ended flat."""
    result = _run_m1(
        _Cross,
        {120: (0.85, 0.85, 0.84, 0.84), 121: (0.84, 0.85, 0.84, 0.85)},
        {121: (1.3, 1.6, 1.3, 1.6), 122: (1.6, 1.6, 1.3, 1.3)},
    )
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", T0 + pd.Timedelta(minutes=121))
    assert trade["exit_price"] == pytest.approx(0.84) and trade["profit"] == -1600.00


def _hours(symbol: str, base: float, special: dict[int, Bar]) -> pd.DataFrame:
    """Five days of flat H1 bars at ``base``, bar i replaced by ``special[i]`` (o, h, l, c)."""
    return flat_frame(symbol, base, special, 120, Timeframe.H1)


def _run_hours(gbpusd_fourth_bar: tuple[float, float, float, float]):
    """EURGBP at 0.84 from the third H1 bar to the sixth, GBPUSD's fourth bar ``gbpusd_fourth_bar``, EURUSD
    flat at 1.10; the ``_Cross`` EA run on them, open prices."""
    frames = {
        "EURGBP": _hours("EURGBP", 0.85, {2: (0.85, 0.85, 0.84, 0.84), 3: (0.84, 0.84, 0.84, 0.84),
                                          4: (0.84, 0.84, 0.84, 0.84), 5: (0.84, 0.85, 0.84, 0.85)}),
        "GBPUSD": _hours("GBPUSD", 1.3, {3: gbpusd_fourth_bar}),
        "EURUSD": _hours("EURUSD", 1.1, {}),
    }  # fmt: skip
    return Backtest(frames, _Cross, account=ACCOUNT, forward=None).run()


def test_open_prices_a_converting_pairs_range_that_takes_the_equity_below_the_stop_out_stops_out():
    """EURGBP stands at 0.84 from the third bar (-1,000 GBP, equity 700 at GBPUSD's 1.30); in the fourth
    bar GBPUSD reaches 1.60 and comes back: the report's own equity path goes to 2,000 - 1,600 = 400 USD
    (equity drawdown 1,600.00), below the 550 of the stop-out, so the position is stopped out in that bar,
    losing at least the 1,450.00 of the crossing (GBPUSD at 1.45)."""
    result = _run_hours(gbpusd_fourth_bar=(1.3, 1.6, 1.3, 1.3))
    assert result.stats["equity_drawdown_maximal"] == pytest.approx(1600.0)  # the path saw 400 USD
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", T0 + pd.Timedelta(hours=3))
    assert -1600.00 <= trade["profit"] <= -1450.00


def test_open_prices_a_stop_out_by_the_converting_pair_closes_at_that_steps_rate():
    """The same bar, hand-worked: the pair is stepped through its four prices (open 1.30, low 1.30, high
    1.60, close 1.30: a doji with no moving bar before it counts as rising), EURGBP standing at 0.84.
    At the high the equity is 2,000 - 1,000 GBP x 1.60 = 400 USD < 550: the position is closed there, at
    the rate of that step: -1,600.00 USD, balance 400.00."""
    result = _run_hours(gbpusd_fourth_bar=(1.3, 1.6, 1.3, 1.3))
    trade = result.trades.iloc[0]
    assert trade["profit"] == pytest.approx(-1600.00)
    assert result.stats["final_balance"] == pytest.approx(400.00)


def test_open_prices_a_converting_pair_moving_in_the_traders_favour_stops_nothing_out():
    """The pair falls to 1.00 inside the bar instead: the loss reads 1,000 GBP x 1.00 = 1,000 USD at its
    lowest and 1,300 at the open, equity 700 USD at worst, above the 550 of the stop-out: the position is
    still open at the end, closed flat at 0.85 (0.00)."""
    result = _run_hours(gbpusd_fourth_bar=(1.3, 1.3, 1.0, 1.3))
    trade = result.trades.iloc[0]
    assert trade["exit_reason"] != "stop out"
    assert trade["profit"] == pytest.approx(0.0)
