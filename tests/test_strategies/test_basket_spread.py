"""The basket spread EA on hand-built candles: it sells (buys) the spread on the bar after its z-score
crosses the upper (lower) band, sizes the hedge legs by the regression's ratios, closes when the z-score
comes back, and decides only from closed bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.synthetic import synthetic_candles
from datafeeds.timeframes import Timeframe
from strategies import BUILTIN, BasketSpreadEA
from strategies.errors import EAError

N, SPIKE, WINDOW = 200, 150, 60
B1, B2 = 0.8, -0.5  # the true hedge ratios of the hand-built basket


def _frame(symbol: str, closes: np.ndarray) -> pd.DataFrame:
    """Bars opening at the previous close and closing at ``closes`` (5 digits, 10 points of spread)."""
    time = pd.date_range("2024-01-01", periods=len(closes), freq="h", tz="UTC")
    close = np.round(closes, 5)
    opens = np.concatenate([[close[0]], close[:-1]])
    cols = {
        "open": opens,
        "high": np.maximum(opens, close),
        "low": np.minimum(opens, close),
        "close": close,
        "spread": np.full(len(close), 10),
    }
    return make_frame(cols, time, CandleMeta(symbol, Timeframe.H1, 5))


def _basket(shock: float) -> dict[str, pd.DataFrame]:
    """log EURUSD = a + 0.8 log GBPUSD - 0.5 log AUDUSD + e, e alternating +-0.0004 (a z-score of about
    1) and ``shock`` at bar SPIKE (about 3 standard deviations); the legs are smooth waves."""
    t = np.arange(N)
    gbp = 1.25 * np.exp(0.01 * np.sin(t / 7))
    aud = 0.65 * np.exp(0.01 * np.cos(t / 11))
    e = 0.0004 * (-1.0) ** t
    e[SPIKE] = shock
    eur = np.exp(0.08 + B1 * np.log(gbp) + B2 * np.log(aud) + e)
    return {"EURUSD": _frame("EURUSD", eur), "GBPUSD": _frame("GBPUSD", gbp), "AUDUSD": _frame("AUDUSD", aud)}


# The noise after the shock is -0.0004 (z about -1), then +0.0004: a sold spread is back at once, a bought
# one a bar later.
@pytest.mark.parametrize(("shock", "side", "back"), [(0.0012, "sell", 1), (-0.0012, "buy", 2)])
def test_a_band_crossing_opens_the_basket_on_the_next_bar_and_its_return_closes_it(shock, side, back):
    frames = _basket(shock)
    result = Backtest(frames, BasketSpreadEA).run(window=WINDOW)
    trades = result.trades
    time = frames["EURUSD"].index
    assert sorted(trades["symbol"]) == ["AUDUSD", "EURUSD", "GBPUSD"]  # one basket, nothing else
    assert set(trades["entry_time"]) == {time[SPIKE + 1]}  # bar SPIKE is seen closed at the next open
    assert set(trades["exit_time"]) == {time[SPIKE + 1 + back]}  # decided on the bar after it is back
    by = trades.set_index("symbol")
    other = "buy" if side == "sell" else "sell"
    assert by.loc["EURUSD", "type"] == side and by.loc["EURUSD", "lots"] == 0.1
    assert by.loc["GBPUSD", "type"] == other  # a positive ratio: against the first leg
    assert by.loc["AUDUSD", "type"] == side  # a negative ratio: with it
    eur, gbp, aud = (frames[s]["close"].iloc[SPIKE] for s in ("EURUSD", "GBPUSD", "AUDUSD"))
    # value-neutral legs: |b| * 0.1 * EURUSD / leg, to 0.01 lot: 0.8 * 0.1 * 1.083 / 1.262 = 0.0687 -> 0.07
    assert by.loc["GBPUSD", "lots"] == round(abs(B1) * 0.1 * eur / gbp, 2)
    assert by.loc["AUDUSD", "lots"] == round(abs(B2) * 0.1 * eur / aud, 2)
    assert by.loc["EURUSD", "entry_price"] == pytest.approx(
        frames["EURUSD"]["open"].iloc[SPIKE + 1] + (10e-5 if side == "buy" else 0.0)
    )


def test_a_z_score_beyond_the_stop_opens_nothing():
    result = Backtest(_basket(0.0012), BasketSpreadEA).run(window=WINDOW, entry=2.0, stop=2.5)
    assert result.trades.empty


def test_without_a_crossing_nothing_trades():
    result = Backtest(_basket(0.0004), BasketSpreadEA).run(window=WINDOW)
    assert result.trades.empty


def test_the_decisions_before_a_bar_do_not_depend_on_the_bars_after_it():
    """Look-ahead: the same bars with a different future give the same baskets up to the cut."""
    full = {s: synthetic_candles(s, "H1", 900, seed=i + 1) for i, s in enumerate(BasketSpreadEA.symbols)}
    cut = 600
    short = {s: make_frame(f.iloc[:cut], f.index[:cut], f.attrs["candles"]) for s, f in full.items()}
    params = {"window": 48, "entry": 1.5}
    a = Backtest(full, BasketSpreadEA).run(**params).trades
    b = Backtest(short, BasketSpreadEA).run(**params).trades
    limit = full["EURUSD"].index[cut - 2]
    cols = ["symbol", "type", "lots", "entry_time", "entry_price", "exit_time", "exit_price", "profit"]
    before_a = a[a["exit_time"] < limit][cols].reset_index(drop=True)
    before_b = b[b["exit_time"] < limit][cols].reset_index(drop=True)
    assert len(before_a) > 10
    pd.testing.assert_frame_equal(before_a, before_b)


def test_a_symbol_missing_bars_in_the_window_is_not_fitted():
    frames = _basket(0.0012)
    gbp = frames["GBPUSD"]
    gone = gbp.index[SPIKE - 5 : SPIKE - 3]  # two GBPUSD bars missing inside the window of the shock
    frames["GBPUSD"] = make_frame(gbp.drop(gone), gbp.index.drop(gone), gbp.attrs["candles"])
    assert Backtest(frames, BasketSpreadEA).run(window=WINDOW).trades.empty


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"window": 5}, "window >= 12"),
        ({"entry": 4.0}, "exit < entry < stop"),
        ({"exit": -1.0}, "exit < entry < stop"),
        ({"lot_step": 0.5}, "lot_step <= lots"),
    ],
)
def test_bad_parameters_are_one_clear_error(params, words):
    with pytest.raises(EAError, match=words):
        Backtest(_basket(0.0), BasketSpreadEA).run(**params)


def test_the_command_line_finds_it_by_name():
    assert BUILTIN["basketspreadea"] is BUILTIN["basket"] is BasketSpreadEA
