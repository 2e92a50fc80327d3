"""A symbol with a bar but no tick (or minute) of its own in it, in a several-symbol run of ticks or 1 minute
OHLC: the clock its records are stamped with and its requests are judged by.

Its bar's open is its first price (the tester generates a bar's ticks from its prices where it has no real
ones, MetaTrader 5 Help, "Real and Generated Ticks", the open first, at the bar's time): its opening checks
are made at the bar's opening time, before any tick (``test_multi_ticks_openings``). Its range, worked by
the open-prices rules after the EA's decision, never before it (the EA did not see it), is stamped at the
decision's moment; the account's one clock (MetaTrader's ``TimeCurrent``, the newest price of any symbol)
judges its requests at the decision and stamps a stop-out's close of its position at the tick or minute of
the stop-out.

EURUSD is the main symbol and decides at its first price of the 02:00 bar, 5 seconds (ticks) or 5 minutes
(1 minute OHLC) in. GBPUSD's 02:00 bar is made from prices that the ticks or minutes given lack. Spread 0,
leverage 500, stop-out at 50 %; one lot of EURUSD at 1.10000 has 220.00 of margin, of GBPUSD at 1.30000
260.00; a point is 1.00 USD a lot.
"""

from __future__ import annotations

import pandas as pd
import pytest

import backtests.merged as merged
import backtests.merged_ticks as merged_ticks
import tests.test_backtests.test_multi_minutes_openings as minutes
import tests.test_backtests.test_multi_ticks_openings as ticks
from backtests import AccountConfig, Backtest
from datafeeds.resample import resample
from datafeeds.ticks import bars_from_ticks
from strategies.base import ExpertAdvisor

MODELS = pytest.mark.parametrize("model", ["ticks", "minutes"])
WALKS = pytest.mark.parametrize("every", [False, True], ids=["screened", "every-price"])


def _run(ea, rows: dict, dropped: dict, deposit: float, model: str, every: bool, monkeypatch):
    """``ea`` on ``rows`` (units from T0: seconds in ticks, minutes in 1 minute OHLC, and a price), the
    bars made from every row and the ``dropped`` rows (units from T0 per symbol) left out of the prices
    given."""
    mod = ticks if model == "ticks" else minutes
    if every:
        target = merged_ticks if model == "ticks" else merged
        monkeypatch.setattr(target, "_stop_out_possible", lambda *args: True)
    if model == "ticks":
        fine = {s: ticks._ticks(s, r) for s, r in rows.items()}
        frames = {s: bars_from_ticks(f, "H1") for s, f in fine.items()}
    else:
        fine = {s: minutes._minutes(s, r) for s, r in rows.items()}
        frames = {s: resample(f, "H1") for s, f in fine.items()}
    for s, units in dropped.items():
        fine[s] = fine[s].drop([mod._at(u) for u in units])
    account = AccountConfig(deposit=deposit, spread=0, leverage=500.0, stop_out_level=50.0)
    data = {"ticks": fine} if model == "ticks" else {"m1": fine}
    result = Backtest(frames, ea, model="ticks" if model == "ticks" else "ohlc1m", account=account,
                      forward=None, **data).run()  # fmt: skip
    minutes._in_time_order(result)
    return result


class _StopThenBuy(ExpertAdvisor):
    """First decision: a GBPUSD buy stop of 1 lot at 1.30500; second: 1 lot of EURUSD bought."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy_stop(1.0, 1.305, symbol="GBPUSD")
        elif len(self.bars) == 2:
            self.buy(1.0, symbol="EURUSD")


@MODELS
@WALKS
def test_a_range_fill_of_a_symbol_without_prices_in_the_bar_is_stamped_at_the_decision_it_follows(
    model, every, monkeypatch
):
    """GBPUSD's 02:00 bar (open 1.30000, high 1.31000, close 1.30000) has none of its prices given: its buy
    stop is not reached at the open, 1.30000, and is filled in its range at 1.30500 (the open-prices
    rules), after the EA's decision, which bought EURUSD at 1.10000 without having seen that fill: the fill
    is stamped at the decision's moment, after the EURUSD deal, never at 02:00, before the decision that did
    not see it (the deals table then ran backwards). GBPUSD ends at 1.30000: -500.00; EURUSD flat: 0.00."""
    mod = ticks if model == "ticks" else minutes
    H, at = mod.H, mod._at
    rows = {
        "EURUSD": [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H + 10, 1.3), (2 * H + 20, 1.31), (2 * H + 30, 1.3),
                   (3 * H, 1.3), (4 * H - 1, 1.3)],
    }  # fmt: skip
    dropped = {"GBPUSD": [2 * H + 10, 2 * H + 20, 2 * H + 30]}
    result = _run(_StopThenBuy, rows, dropped, 10_000.0, model, every, monkeypatch)
    stop = result.orders[result.orders["type"] == "buy_stop"].iloc[0]
    assert (stop["state"], stop["fill_price"]) == ("filled", 1.305)
    assert stop["time_done"] == at(2 * H + 5)  # was 02:00
    eur = result.deals[(result.deals["symbol"] == "EURUSD") & (result.deals["entry"] == "in")].iloc[0]
    assert eur["time"] == at(2 * H + 5)
    assert result.stats["total_net_profit"] == pytest.approx(-500.0)


class _LimitOnTheQuietSymbol(ExpertAdvisor):
    """Second decision: a GBPUSD sell limit of 1 lot at 1.32000 expiring at ``expiry`` (per test); the
    retcode kept in ``seen``."""

    symbols = ("EURUSD", "GBPUSD")
    expiry: pd.Timestamp
    seen: list

    def on_bar(self):
        if len(self.bars) == 2:
            placed = self.sell_limit(1.0, 1.32, symbol="GBPUSD", expiration=self.expiry)
            self.seen.append((self.time_current, placed, self.last_retcode))


@MODELS
@WALKS
def test_a_request_on_a_symbol_without_prices_in_the_bar_is_judged_on_the_decisions_clock(
    model, every, monkeypatch
):
    """At the decision (02:00:05, or 02:05) a GBPUSD order expiring 2 seconds (minutes) before is refused
    (10022: the expiration is not after the current time), as on any other symbol: the account has one
    clock. GBPUSD's own clock read its bar's opening time, 02:00, and accepted it (ticks)."""
    mod = ticks if model == "ticks" else minutes
    H, at = mod.H, mod._at
    rows = {
        "EURUSD": [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H + 10, 1.3), (3 * H, 1.3), (4 * H - 1, 1.3)],
    }
    ea = type("Limit", (_LimitOnTheQuietSymbol,), {"expiry": at(2 * H + 3), "seen": []})
    _run(ea, rows, {"GBPUSD": [2 * H + 10]}, 10_000.0, model, every, monkeypatch)
    assert ea.seen == [(at(2 * H + 5), None, 10022)]


class _HoldBoth(ExpertAdvisor):
    """First decision: 1 lot of EURUSD and 1 lot of GBPUSD bought."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")
            self.buy(1.0, symbol="GBPUSD")


@MODELS
@WALKS
def test_a_stop_out_closes_a_symbol_without_prices_in_the_bar_at_the_moment_of_the_stop_out(
    model, every, monkeypatch
):
    """On 2,400.00: GBPUSD's 02:00 bar (no price of it given) opens at 1.28000, -2,000.00: level
    400 / 480 = 83 % at its opening. EURUSD falls to 1.09800 at +30 (seconds, minutes), -200.00: 200 / 480
    = 42 %, stop-out: the most losing position, GBPUSD's, is closed at the price it stands at, 1.28000
    (-2,000.00), and the level is 200 / 220 = 91 %. That close comes at EURUSD's price of +30, and is
    stamped there: GBPUSD's own clock had it at its bar's opening time, 02:00, before the decision. EURUSD
    ends at 1.10000: 0.00; net -2,000.00."""
    mod = ticks if model == "ticks" else minutes
    H, at = mod.H, mod._at
    rows = {
        "EURUSD": [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (2 * H + 30, 1.098), (3 * H, 1.1), (4 * H - 1, 1.1)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H + 10, 1.28), (3 * H, 1.28), (4 * H - 1, 1.28)],
    }
    result = _run(_HoldBoth, rows, {"GBPUSD": [2 * H + 10]}, 2_400.0, model, every, monkeypatch)
    gbp = result.trades[result.trades["symbol"] == "GBPUSD"].iloc[0]
    assert (gbp["exit_reason"], gbp["exit_price"]) == ("stop out", 1.28)
    assert gbp["exit_time"] == at(2 * H + 30)  # was 02:00
    assert gbp["profit"] == pytest.approx(-2_000.0)
    assert result.stats["total_net_profit"] == pytest.approx(-2_000.0)
