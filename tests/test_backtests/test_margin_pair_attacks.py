"""Hostile cases of the pair that converts a symbol's margin (not its profit) into the deposit currency.

EURGBP on a dollar account (MQL5 Reference, Symbol Properties, ``SYMBOL_TRADE_CALC_MODE``, Forex: margin =
lots x contract size / leverage in the margin currency, EUR; converted into the deposit currency at the
rate of the moment, through EURUSD; profit in GBP through GBPUSD). The backtest charges a position's margin
when it opens, at the margin pair's rate of that deal, and keeps that charge while the position is open
(``backtests.broker.margin``: "Each position is charged at its margin price, fixed when it opens"). So the
rate that matters is EURUSD's at the very moment of the deal: a pending order filled inside a bar, a minute
or between ticks must read EURUSD where it stands then, never its price at the bar's open (stale) nor a
price it reaches later (the future).

Figures, all with spread 0, leverage 100, a 2,000 USD deposit, stop-out at 50 %, GBPUSD flat at 1.30:
- 1 lot of EURGBP bought at 0.85000 while EURUSD stands at 1.50: margin 100,000 / 100 = 1,000 EUR x 1.50 =
  1,500 USD (free margin 500 left). EURGBP then falls to 0.84: -1,000 GBP x 1.30 = -1,300 USD, equity 700,
  level 700 / 1,500 = 46.67 % < 50 %: stopped out. Where the fall is one jump (ticks), at 0.84: -1,300.00.
  Where it is walked (a bar or minute falling from 0.85 to 0.84): the level is reached at equity 750, a
  loss of 1,250 USD = 961.54 GBP, EURGBP 0.8403846; the first whole point beyond is 0.84038: 962 GBP x
  1.30 = -1,250.60.
- the same bought while EURUSD stands at 1.10: margin 1,100 USD, level at 0.84 700 / 1,100 = 63.64 %:
  never stopped out; closed at the end at 0.84, -1,300.00, the report's lowest margin level 63.64 %.
"""

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
ACCOUNT = AccountConfig(deposit=2_000.0, spread=0, leverage=100.0, stop_out_level=50.0)


class _LimitAt085(ExpertAdvisor):
    """At 01:00 (one closed bar) a buy limit of 1 lot of EURGBP at 0.85000, EURGBP standing at 0.85100."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy_limit(1.0, 0.85, symbol="EURGBP") is not None


class _BuyAtSecondBar(ExpertAdvisor):
    """1 lot of EURGBP bought at market at 01:00's open."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(1.0, symbol="EURGBP") is not None


def _stopped_out(result, price: float, profit: float, at: pd.Timestamp) -> None:
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", at)
    assert trade["exit_price"] == pytest.approx(price) and trade["profit"] == profit


def _held(result) -> None:
    trade = result.trades.iloc[0]
    assert trade["exit_reason"] == "end of test"
    assert trade["exit_price"] == pytest.approx(0.84) and trade["profit"] == -1300.00
    assert result.stats["margin_level_min_pct"] == pytest.approx(700 / 1100 * 100, abs=0.01)


# -- ticks -----------------------------------------------------------------------------------------------


def _ticks(symbol: str, rows: list[tuple[int, float]]) -> pd.DataFrame:
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


def _run_ticks(eurusd_high: tuple[int, int], drop: int = 4 * H + 600):
    """Five hours of ticks: EURGBP at 0.85100 falls to 0.85000 at 02:30:00 (the limit fills) and to 0.84 at
    second ``drop`` (04:10:00); EURUSD at 1.10 stands at 1.50 from second ``eurusd_high[0]`` to
    ``eurusd_high[1]``; GBPUSD flat at 1.30."""
    hours = [0, H, 2 * H, 3 * H, 4 * H]
    up, down = eurusd_high
    eurgbp = sorted(({s: 0.851 for s in (0, H, 2 * H)} | {s: 0.85 for s in (2 * H + 1800, 3 * H, 4 * H)}
                     | {s: 0.84 for s in (drop, 5 * H - 1) if s >= drop}).items())  # fmt: skip
    eurusd = sorted(({s: 1.1 for s in [*hours, 5 * H - 1]} | {up: 1.5, down: 1.1}).items())
    rows = {"EURGBP": eurgbp, "EURUSD": eurusd, "GBPUSD": [(s, 1.3) for s in [*hours, 5 * H - 1]]}
    ticks = {s: _ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    return Backtest(frames, _LimitAt085, model="ticks", ticks=ticks, account=ACCOUNT, forward=None).run()


@pytest.mark.parametrize("drop", [4 * H + 600, 2 * H + 1801], ids=["later bar", "next second"])
def test_ticks_a_limit_filled_while_the_margin_pair_is_high_is_charged_at_that_rate(drop):
    """EURUSD at 1.50 from 02:20 to 02:40, the limit fills at 02:30: 1,500 USD of margin, so EURGBP's jump
    to 0.84 (at 04:10, or a second after the fill) leaves 700 / 1,500 = 46.67 %: stopped out at that tick,
    -1,300.00."""
    result = _run_ticks((2 * H + 1200, 2 * H + 2400), drop)
    _stopped_out(result, 0.84, -1300.00, T0 + pd.Timedelta(seconds=drop))


@pytest.mark.parametrize(
    "eurusd_high", [(2 * H + 2100, 2 * H + 2700), (2 * H + 600, 2 * H + 1200)], ids=["later", "earlier"]
)
def test_ticks_a_limit_filled_while_the_margin_pair_is_back_is_charged_at_that_rate(eurusd_high):
    """EURUSD at 1.50 only after the fill (02:35-02:45) or only before it (02:10-02:20): the fill at 02:30
    reads 1.10, 1,100 USD of margin, and 0.84 leaves 63.64 %: held to the end."""
    _held(_run_ticks(eurusd_high))


# -- 1 minute OHLC ------------------------------------------------------------------------------------------


def _minutes(symbol: str, base: float, special: dict[int, Bar]) -> pd.DataFrame:
    """Five hours of flat M1 bars at ``base``, minute i replaced by ``special[i]`` (o, h, l, c)."""
    return flat_frame(symbol, base, special, 300, Timeframe.M1)


def _run_m1(eurusd_up: int, eurusd_down: int, drop: int = 250):
    """EURGBP at 0.85100; its 02:30 minute falls to 0.85000 (the limit fills there) and stays; its 04:10
    minute (or minute ``drop``) falls from 0.85 to 0.84 (a bear minute: open, high, low, close) and stays.
    EURUSD at 1.10 rises to 1.50 in minute ``eurusd_up`` (a bull minute) and stands there until minute
    ``eurusd_down`` falls back. GBPUSD flat at 1.30."""
    eurgbp = {i: (0.851,) * 4 for i in range(150)}
    eurgbp[150] = (0.851, 0.851, 0.85, 0.85)
    eurgbp |= {i: (0.85,) * 4 for i in range(151, drop)}
    eurgbp[drop] = (0.85, 0.85, 0.84, 0.84)
    eurgbp |= {i: (0.84,) * 4 for i in range(drop + 1, 300)}
    eurusd = {eurusd_up: (1.1, 1.5, 1.1, 1.5), eurusd_down: (1.5, 1.5, 1.1, 1.1)}
    eurusd |= {i: (1.5,) * 4 for i in range(eurusd_up + 1, eurusd_down)}
    m1 = {
        "EURGBP": _minutes("EURGBP", 0.851, eurgbp),
        "EURUSD": _minutes("EURUSD", 1.1, eurusd),
        "GBPUSD": _minutes("GBPUSD", 1.3, {}),
    }
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    return Backtest(frames, _LimitAt085, model="ohlc1m", m1=m1, account=ACCOUNT, forward=None).run()


@pytest.mark.parametrize("drop", [250, 151], ids=["later bar", "next minute"])
def test_ohlc1m_a_limit_filled_while_the_margin_pair_is_high_is_charged_at_that_rate(drop):
    """EURUSD at 1.50 from its 02:20 minute to 02:40: EURGBP's 02:30 minute fills the limit with EURUSD at
    its 1.50 open of that minute: 1,500 USD. The fall of the 04:10 minute (or of the minute after the fill)
    crosses 50 % at 0.8403846: stopped out at 0.84038, -1,250.60."""
    result = _run_m1(140, 160, drop)
    _stopped_out(result, 0.84038, -1250.60, T0 + pd.Timedelta(minutes=drop))


@pytest.mark.parametrize(("up", "down"), [(155, 170), (130, 140)], ids=["later", "earlier"])
def test_ohlc1m_a_limit_filled_while_the_margin_pair_is_back_is_charged_at_that_rate(up, down):
    """EURUSD at 1.50 only from its 02:35 minute (after the fill) or only until 02:20 (before it): the
    02:30 fill reads 1.10, 1,100 USD, and 0.84 leaves 63.64 %: held to the end."""
    _held(_run_m1(up, down))


# -- open prices ---------------------------------------------------------------------------------------------


def _hours(symbol: str, base: float, special: dict[int, Bar]) -> pd.DataFrame:
    return flat_frame(symbol, base, special, 6, Timeframe.H1)


@pytest.mark.parametrize(
    ("eurusd", "stopped"),
    [
        ({1: (1.5, 1.5, 1.1, 1.1)}, True),  # opens at 1.50 where the order fills, falls back in the bar
        ({0: (1.1, 1.1, 1.1, 1.5), 1: (1.1, 1.1, 1.1, 1.1)}, False),  # 1.50 was the bar before's close
        ({1: (1.1, 1.5, 1.1, 1.5)}, False),  # reaches 1.50 only later in the bar of the order
    ],
    ids=["open at 1.50", "close before at 1.50", "high later in the bar"],
)
def test_open_prices_a_market_order_is_charged_at_the_margin_pairs_open(eurusd, stopped):
    """The order fills at 01:00's open, EURGBP 0.85: charged at EURUSD's open of that bar. At 1.50, the
    03:00 bar's fall from 0.85 to 0.84 stops it out at 0.84038 (-1,250.60); at 1.10 it is held (63.64 %)."""
    frames = {
        "EURGBP": _hours("EURGBP", 0.85, {3: (0.85, 0.85, 0.84, 0.84), 4: (0.84,) * 4, 5: (0.84,) * 4}),
        "EURUSD": _hours("EURUSD", 1.1, eurusd),
        "GBPUSD": _hours("GBPUSD", 1.3, {}),
    }
    result = Backtest(frames, _BuyAtSecondBar, account=ACCOUNT, forward=None).run()
    if stopped:
        _stopped_out(result, 0.84038, -1250.60, T0 + pd.Timedelta(hours=3))
    else:
        _held(result)


class _BuyTwice(ExpertAdvisor):
    """1 lot of EURGBP at 01:00's open and 1 more at 02:00's (one netting position of 2 lots)."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) in (1, 2):
            assert self.buy(1.0, symbol="EURGBP") is not None


def test_open_prices_a_netting_position_added_to_keeps_each_deals_margin_charge():
    """4,000 USD. The first lot at EURUSD's 1.10 (1,100 USD), the second at its 1.50 (1,500 USD): 2,600 USD.
    EURGBP then falls to 0.84: -2,000 GBP x 1.30 = -2,600, equity 1,400, level 1,400 / 2,600 = 53.85 %:
    held. The whole position charged again at 1.50 (3,000) would be 46.67 % and stopped out; at the first
    deal's 1.10 (2,200) 63.64 %."""
    frames = {
        "EURGBP": _hours("EURGBP", 0.85, {3: (0.85, 0.85, 0.84, 0.84), 4: (0.84,) * 4, 5: (0.84,) * 4}),
        "EURUSD": _hours("EURUSD", 1.1, {2: (1.5,) * 4, 3: (1.5,) * 4, 4: (1.5,) * 4, 5: (1.5,) * 4}),
        "GBPUSD": _hours("GBPUSD", 1.3, {}),
    }
    account = AccountConfig(deposit=4_000.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = Backtest(frames, _BuyTwice, account=account, forward=None).run()
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["lots"]) == ("end of test", 2.0)
    assert trade["profit"] == -2600.00
    assert result.stats["margin_level_min_pct"] == pytest.approx(1400 / 2600 * 100, abs=0.01)


class _SellLimitWithTarget(ExpertAdvisor):
    """At 01:00, EURGBP opening at 0.84900: a sell limit of 1 lot at 0.85100, its take-profit at 0.84950."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.sell_limit(1.0, 0.851, tp=0.8495, symbol="EURGBP") is not None


def test_open_prices_a_take_profit_is_never_filled_at_a_price_from_before_its_position_opened():
    """1,210 USD. EURGBP's 01:00 bar rises 0.84900 -> 0.85600 -> 0.85300 (open = low: the tester's ticks go
    open, low, high, close): the limit fills at 0.85100 on the way up, and the take-profit at 0.84950 is
    never reached after it; the bar after stands at 0.85300, where the run ends: -200 GBP x 1.30 = -260.00.
    GBPUSD's 01:00 bar reaches 1.35, so the account's stop-out in that bar cannot be ruled out from the
    bars alone (at 0.856 and 1.35: -675 USD, equity 535 < 550, 50 % of the 1,100 USD margin charged at
    EURUSD's 1.10), though it never happens (at 0.856 GBPUSD stands at its open, 1.30: equity 560); a
    check of that stop-out at GBPUSD's prices must not take EURGBP back to its 0.84900 open, where the
    take-profit would be met at a price the position never saw (+260.00, 520 USD in the EA's favour)."""
    frames = {
        "EURGBP": _hours("EURGBP", 0.853, {0: (0.849,) * 4, 1: (0.849, 0.856, 0.849, 0.853)}),
        "EURUSD": _hours("EURUSD", 1.1, {}),
        "GBPUSD": _hours("GBPUSD", 1.3, {1: (1.3, 1.35, 1.3, 1.3)}),
    }
    account = AccountConfig(deposit=1_210.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = Backtest(frames, _SellLimitWithTarget, account=account, forward=None).run()
    trade = result.trades.iloc[0]
    assert (trade["entry_price"], trade["exit_reason"]) == (pytest.approx(0.851), "end of test")
    assert trade["exit_price"] == pytest.approx(0.853) and trade["profit"] == -260.00


class _HoldOverMidnight(ExpertAdvisor):
    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            assert self.buy(1.0, symbol="EURGBP") is not None


@pytest.mark.parametrize("model", ["ticks", "ohlc1m"])
@pytest.mark.parametrize(("moved", "swap"), [(-10, -15.00), (10, -11.00)], ids=["before", "after"])
def test_a_swap_in_the_margin_currency_is_converted_at_the_margin_pairs_price_of_midnight(model, moved, swap):
    """1 lot of EURGBP held from Monday 21:00 over the server's midnight (UTC), its swap -10 EUR a night
    (``currency_margin``: the margin currency's money), converted through EURUSD at the rollover. Every
    symbol quotes every 10 seconds, flat but for EURUSD, which goes from 1.10 to 1.50 ``moved`` seconds from
    midnight: 10 seconds before, the night costs 10 x 1.50 = 15.00 USD; 10 seconds after, 10 x 1.10 =
    11.00 (the price of midnight, not one of later). A walk that skipped EURUSD's quiet ticks, as a pair
    that moves no position's money, would convert at a stale or later price."""
    from dataclasses import replace

    from datafeeds.symbols import BUILTIN

    start = pd.Timestamp("2024-01-01 20:00", tz="UTC")
    secs = np.arange(0, 8 * H, 10)
    move = 4 * H + moved

    def ticks(symbol: str, prices: np.ndarray) -> pd.DataFrame:
        ns = (start.value + secs.astype(np.int64) * 10**9).astype(np.int64)
        return make_ticks(ns, prices, prices.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))

    flat = np.ones(len(secs))
    data = {
        "EURGBP": ticks("EURGBP", 0.85 * flat),
        "GBPUSD": ticks("GBPUSD", 1.3 * flat),
        "EURUSD": ticks("EURUSD", np.where(secs < move, 1.1, 1.5)),
    }
    frames = {s: bars_from_ticks(t, "H1") for s, t in data.items()}
    fine = (
        {"ticks": data}
        if model == "ticks"
        else {"m1": {s: bars_from_ticks(t, "M1") for s, t in data.items()}}
    )
    specs = {"EURGBP": replace(BUILTIN["EURGBP"], swap_long=-10.0, swap_mode="currency_margin")}
    account = AccountConfig(deposit=100_000.0, spread=0, leverage=100.0)
    result = Backtest(
        frames, _HoldOverMidnight, model=model, account=account, forward=None, specs=specs, **fine
    )
    trade = result.run().trades.iloc[0]
    assert (trade["swap"], trade["profit"]) == (swap, 0.0)
