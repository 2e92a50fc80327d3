"""An account trading several symbols measures its equity at every price of every symbol in time order,
each symbol at its latest quote, as MetaTrader's tester does in "1 minute OHLC" and real ticks: a peak on
one symbol's minute and a trough on another's later minute inside one bar are its drawdown, whatever the
bars' own four prices (taken step by step together) would put there.

Flat minutes at the minutes given only (spread 0), H1 bars 00:00 to 03:00 of Tuesday 2024-01-02; the EA
deals at the 01:00 bar's open (its first decision), every position ends at the end of the test at 1.0 lots.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import backtests.multi_replay as multi_replay
from backtests import AccountConfig, Backtest
from datafeeds import resample
from strategies.base import ExpertAdvisor
from tests.test_backtests.merged_reference import reference_drawdowns
from tests.test_backtests.test_midnight_swap_path import ticks_of
from tests.test_backtests.test_multi_minutes_openings import T0, H, _minutes

EDGES = [0, 59, H, H + 59, 2 * H, 3 * H, 3 * H + 59]  # each bar's first minute (and the last's)


def _flat(price: float, moves: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Minutes at ``price`` at the bars' edges, at the prices ``moves`` gives in the 02:00 bar."""
    rows = dict.fromkeys(EDGES, price) | {2 * H + 59: price} | dict(moves)
    return sorted(rows.items())


def _run(ea, minutes: dict[str, list], model: str, spreads: dict[str, dict[int, int]] | None = None):
    """``ea`` on the symbols' flat ``minutes`` (``spreads``: a symbol's spread in points at some of its
    minutes, 0 elsewhere), through their minutes or a tick at each minute."""
    m1 = {s: _minutes(s, rows) for s, rows in minutes.items()}
    for s, given in (spreads or {}).items():
        at = [T0 + pd.Timedelta(minutes=m) for m in given]
        m1[s].loc[at, "spread"] = np.array(list(given.values()), dtype=np.int32)
    frames = {s: resample(m, "H1") for s, m in m1.items()}
    assert all(len(f) == 4 for f in frames.values())
    prices = {s: ticks_of(s, m) for s, m in m1.items()} if model == "ticks" else m1
    key = "ticks" if model == "ticks" else "m1"
    config = AccountConfig(deposit=10_000.0, spread=None, missing_spread=0, leverage=500.0)
    return Backtest(frames, ea, account=config, forward=None, model=model, **{key: prices}).run()


class _LongEurShortGbp(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")
            self.sell(1.0, symbol="GBPUSD")


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_peak_on_one_symbols_minute_and_a_trough_on_anothers_later_minute(model):
    """1 lot of EURUSD bought at 1.10000 and 1 lot of GBPUSD sold at 1.30000 (1.00 USD a point each). In
    the 02:00 bar EURUSD is at 1.10500 at 02:10 (10,500.00: the peak) and back at 1.10000 at 02:15; GBPUSD
    at 1.30500 at 02:20 (9,500.00: the trough) and back at 1.30000 at 02:25. MetaTrader's largest fall:
    10,500.00 -> 9,500.00 = 1,000.00 USD (9.523810 % of the peak), the deposit's own low 500.00. The bars'
    four prices taken step by step put both highs at one step (10,000.00 + 500.00 - 500.00): no drawdown
    at all was booked."""
    eur = _flat(1.1, [(2 * H + 10, 1.105), (2 * H + 15, 1.1)])
    gbp = _flat(1.3, [(2 * H + 20, 1.305), (2 * H + 25, 1.3)])
    result = _run(_LongEurShortGbp, {"EURUSD": eur, "GBPUSD": gbp}, model)
    assert sorted(result.trades["entry_price"]) == [1.1, 1.3]
    assert list(result.trades["profit"]) == [0.0, 0.0]
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == 1_000.0
    assert stats["equity_drawdown_maximal_pct"] == pytest.approx(100 * 1_000 / 10_500, abs=1e-6)
    assert stats["equity_drawdown_absolute"] == 500.0
    assert list(result.equity_path["equity"]) == [10_500.0, 9_500.0]
    assert list(result.equity_path["time"]) == [pd.Timestamp("2024-01-02 02:00", tz="UTC")] * 2


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_short_is_valued_at_the_ask_of_its_own_minute(model):
    """The same two positions; GBPUSD's bid stays at 1.30000, its spread 0 but at 02:20, 50 points (its
    ask 1.30050): the short is worth -50.00 USD there. MetaTrader's largest fall: 10,000.00 -> 9,950.00 =
    50.00 USD. The bars' four prices took the bar's lowest spread (0) at its extremes and its close's at the
    close: no drawdown."""
    eur, gbp = _flat(1.1, []), _flat(1.3, [(2 * H + 20, 1.3)])
    result = _run(_LongEurShortGbp, {"EURUSD": eur, "GBPUSD": gbp}, model, {"GBPUSD": {2 * H + 20: 50}})
    assert list(result.trades["profit"]) == [0.0, 0.0]
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == 50.0
    assert stats["equity_drawdown_absolute"] == 50.0


class _LongEurGbp(ExpertAdvisor):
    symbols = ("EURGBP", "GBPUSD", "EURUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")


def test_a_profit_converted_through_another_symbol_at_its_latest_quote():
    """1 lot of EURGBP (100,000 EUR) bought at 0.85000 on a dollar account, its pounds converted at
    GBPUSD's latest quote (spread 0). 02:10 EURGBP 0.85500: +500 GBP x 1.30000 = 10,650.00 (the peak);
    02:20 GBPUSD 1.20000: 10,600.00; 02:30 EURGBP 0.84500: -500 GBP x 1.20000 = 9,400.00; 02:40 GBPUSD
    1.30000: 9,350.00 (the trough); 02:50 EURGBP 0.85000: 10,000.00. MetaTrader's largest fall: 10,650.00
    -> 9,350.00 = 1,300.00 USD (12.206573 % of the peak), the deposit's own low 650.00. The bars' four
    prices step by step (both bars open at their close: lows first) saw EURGBP's low at GBPUSD's low
    (9,400.00), then both highs (10,650.00), then the close (10,000.00): 650.00 booked, the deposit's low
    600.00."""
    eurgbp = _flat(0.85, [(2 * H + 10, 0.855), (2 * H + 30, 0.845), (2 * H + 50, 0.85)])
    gbpusd = _flat(1.3, [(2 * H + 20, 1.2), (2 * H + 40, 1.3)])
    minutes = {"EURGBP": eurgbp, "GBPUSD": gbpusd, "EURUSD": _flat(1.1, [])}  # EURUSD: the margin's euros
    result = _run(_LongEurGbp, minutes, "ohlc1m")
    assert list(result.trades["entry_price"]) == [0.85] and list(result.trades["profit"]) == [0.0]
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == 1_300.0
    assert stats["equity_drawdown_maximal_pct"] == pytest.approx(100 * 1_300 / 10_650, abs=1e-6)
    assert stats["equity_drawdown_absolute"] == 650.0


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_eas_on_three_symbols_match_a_slow_reference(model, seed, monkeypatch):
    """Random EAs of every request kind on three symbols (``tools/diff_harness.py``: EURGBP through
    GBPUSD, USDJPY, EURUSD; every account): the equity drawdowns equal a plain-Python valuation of the
    account at every price of every symbol in time order (``merged_reference``)."""
    from tests.test_backtests.test_one_symbol_two_walks import _harness

    harness, seen = _harness(), []
    path = multi_replay.account_drawdowns

    def both(broker, first, last, deposit, start):
        found = path(broker, first, last, deposit, start)
        seen.append((found, reference_drawdowns(broker, first, last, deposit)))
        return found

    monkeypatch.setattr(multi_replay, "account_drawdowns", both)
    for account in range(len(harness.ACCOUNTS)):
        harness.case(model, seed, 3, account, single_path=False)
    assert len(seen) == len(harness.ACCOUNTS)
    for found, reference in seen:
        assert found is not None
        for key, value in reference.items():
            assert found.drawdowns[key] == pytest.approx(value, rel=1e-9, abs=2e-6), (key, found.drawdowns)
