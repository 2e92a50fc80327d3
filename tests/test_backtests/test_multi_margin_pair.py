"""A pair that converts only a symbol's margin (EURUSD for EURGBP's euros on a dollar account) moves nothing
of the account once the position is open: the margin is charged when the position opens, at the margin
pair's rate of that deal, and stays so (``backtests.broker.convert``, ``backtests.broker.margin``), so a
spike of that pair inside a bar, a minute or between ticks neither changes the used margin nor the margin
level, and stops nothing out, in every model; the report's margin level says the same. Only the pair
converting the profit moves the equity (``test_multi_conversion_attacks``), and where both move in one bar
the stop-out is the profit pair's, at its rate.

Each case below would stop the position out if the margin were converted again at every rate and the walks
stepped the margin pair as they step the profit's (the figures say where): each fails the day the rule
changes without these cases being worked again."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_backtests.test_multi_conversion_attacks import ACCOUNT, T0, H, _Cross, _minutes

from backtests import AccountConfig, Backtest
from backtests.broker.market import BarPriceError
from backtests.broker.portfolio import open_brokers
from backtests.pair_moves import money_pairs, moved_by, priced_through
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.resample import resample
from datafeeds.symbols import BUILTIN
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

# 1 lot of EURGBP bought at 0.85 on a 2,000 USD account, leverage 100, spread 0: margin 100,000 EUR / 100
# = 1,000 EUR at EURUSD's ask 1.10 of the deal = 1,100.00 USD, stop-out at 50 % = 550 USD of equity. EURGBP
# then stands at 0.84: -1,000 GBP at GBPUSD's 1.30 = -1,300 USD, equity 700, margin level 700 / 1,100 =
# 63.64 %. EURUSD then spikes to 1.50: the margin re-converted there would be 1,500 USD, a level of
# 700 / 1,500 = 46.67 %, below 50 %; charged at the deal's rate it stays 1,100 and the level 63.64 %.
LEVEL = 63.64


def _hours(symbol: str, base: float, special: dict, digits: int = 5) -> pd.DataFrame:
    """Five days of flat H1 bars at ``base``, bar i replaced by ``special[i]`` (o, h, l, c)."""
    n = 120
    cols = {c: np.full(n, base) for c in ("open", "high", "low", "close")}
    for i, (o, h, lo, c) in special.items():
        cols["open"][i], cols["high"][i], cols["low"][i], cols["close"][i] = o, h, lo, c
    cols["tick_volume"] = np.ones(n, dtype=np.int64)
    index = pd.date_range(T0, periods=n, freq="h")
    return make_frame(cols, index, CandleMeta(symbol, Timeframe.H1, digits, UTC, "test"))


_EURGBP_AT_084 = {2: (0.85, 0.85, 0.84, 0.84), 3: (0.84, 0.84, 0.84, 0.84),
                  4: (0.84, 0.84, 0.84, 0.84), 5: (0.84, 0.85, 0.84, 0.85)}  # fmt: skip
_SPIKE = (1.1, 1.5, 1.1, 1.1)  # EURUSD's fourth bar: up to 1.50 and back


def _open_prices(eurusd: dict, gbpusd: dict):
    frames = {
        "EURGBP": _hours("EURGBP", 0.85, _EURGBP_AT_084),
        "GBPUSD": _hours("GBPUSD", 1.3, gbpusd),
        "EURUSD": _hours("EURUSD", 1.1, eurusd),
    }
    return Backtest(frames, _Cross, account=ACCOUNT, forward=None).run()


def _held_to_the_end(result, level: float = LEVEL) -> None:
    """The EURGBP position was never stopped out: closed at the end at 0.85 (0.00), and the report's lowest
    margin level is ``level`` (the margin as charged at the deal)."""
    trade = result.trades[result.trades["symbol"] == "EURGBP"].iloc[0]
    assert trade["exit_reason"] == "end of test"
    assert trade["profit"] == pytest.approx(0.0)
    assert result.stats["margin_level_min_pct"] == pytest.approx(level)


def test_open_prices_a_spike_of_the_margin_pair_alone_stops_nothing_out():
    """EURUSD's fourth bar reaches 1.50 while EURGBP stands at 0.84 and GBPUSD at 1.30 (see the module's
    figures): re-converted, the margin level would be 46.67 %; as charged it stays 63.64 %."""
    _held_to_the_end(_open_prices({3: _SPIKE}, {}))


def test_open_prices_both_pairs_in_one_bar_stop_out_at_the_profit_pairs_rate_only():
    """GBPUSD reaches 1.60 in the same bar as EURUSD's 1.50: at GBPUSD's high the equity is 2,000 -
    1,000 x 1.60 = 400 USD < 550 (50 % of the 1,100 charged): stopped out there, -1,600.00, balance 400.00,
    as with EURUSD flat; EURUSD's move changes nothing of it."""
    for eurusd in ({}, {3: _SPIKE}):
        result = _open_prices(eurusd, {3: (1.3, 1.6, 1.3, 1.3)})
        trade = result.trades.iloc[0]
        assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", T0 + pd.Timedelta(hours=3))
        assert trade["profit"] == pytest.approx(-1600.00)
        assert result.stats["final_balance"] == pytest.approx(400.00)


def _ohlc1m(ea, eurusd: dict, account: AccountConfig = ACCOUNT):
    """Four hours of M1 bars: EURGBP at 0.84 from its 02:00 minute to 02:09, GBPUSD flat at 1.30, EURUSD
    at 1.10 but for ``eurusd``'s minutes; ``ea`` run on them, ``ohlc1m`` model."""
    eurgbp = {120: (0.85, 0.85, 0.84, 0.84), **{m: (0.84,) * 4 for m in range(121, 130)},
              130: (0.84, 0.85, 0.84, 0.85)}  # fmt: skip
    m1 = {
        "EURGBP": _minutes("EURGBP", 0.85, eurgbp),
        "GBPUSD": _minutes("GBPUSD", 1.3, {}),
        "EURUSD": _minutes("EURUSD", 1.1, eurusd),
    }
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    return Backtest(frames, ea, model="ohlc1m", m1=m1, account=account, forward=None).run()


_EURUSD_MINUTE_SPIKE = {122: (1.1, 1.5, 1.1, 1.5), 123: (1.5, 1.5, 1.1, 1.1)}


def test_ohlc1m_a_minute_spike_of_the_margin_pair_alone_stops_nothing_out():
    """EURUSD's 02:02 minute rises to 1.50, its 02:03 minute comes back, EURGBP at 0.84 meanwhile: 63.64 %
    as charged (46.67 % re-converted at 1.50)."""
    _held_to_the_end(_ohlc1m(_Cross, _EURUSD_MINUTE_SPIKE))


class _CrossAndEurusdShort(ExpertAdvisor):
    """1 lot of EURGBP bought and 0.01 lot of EURUSD sold at the second bar."""

    symbols = ("EURGBP", "EURUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")
            self.sell(0.01, symbol="EURUSD")


def test_ohlc1m_a_margin_pair_that_is_traded_too_moves_only_its_own_positions_money():
    """0.01 lot of EURUSD is sold beside EURGBP's lot on a 2,400 USD account (its margin 10 EUR at 1.10 =
    11.00 USD, 1,111.00 in all). With EURGBP at 0.84 (-1,300) and EURUSD's minute at 1.50 the short loses
    0.01 x 100,000 x 0.40 = 400: equity 2,400 - 1,700 = 700, a level of 700 / 1,111 = 63.01 % as charged,
    the lowest of the run; re-converted at 1.50 the margin would be 1,010 x 1.50 = 1,515 and the level
    46.20 %, a stop-out. Nothing is stopped out; both end flat."""
    account = AccountConfig(deposit=2_400.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = _ohlc1m(_CrossAndEurusdShort, _EURUSD_MINUTE_SPIKE, account)
    assert (result.trades["exit_reason"] == "end of test").all()
    assert result.trades["profit"].tolist() == pytest.approx([0.0, 0.0])
    _held_to_the_end(result, level=63.01)


def _tick_rows(symbol: str, rows: list[tuple[int, float]]) -> pd.DataFrame:
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


def test_ticks_a_tick_of_the_margin_pair_alone_stops_nothing_out():
    """EURGBP dips to 0.84 at 02:00:10 (equity 700 USD); EURUSD ticks at 1.50 at 02:00:20 and back at
    02:00:30, EURGBP back at 0.85 at 02:00:40: 63.64 % as charged (46.67 % re-converted at that tick)."""
    flat = (0, H, 2 * H)
    rows = {
        "EURGBP": [(s, 0.85) for s in flat] + [(2 * H + 10, 0.84), (2 * H + 40, 0.85), (4 * H - 1, 0.85)],
        "GBPUSD": [(s, 1.3) for s in flat] + [(4 * H - 1, 1.3)],
        "EURUSD": [(s, 1.1) for s in flat] + [(2 * H + 20, 1.5), (2 * H + 30, 1.1), (4 * H - 1, 1.1)],
    }
    ticks = {s: _tick_rows(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    result = Backtest(frames, _Cross, model="ticks", ticks=ticks, account=ACCOUNT, forward=None).run()
    _held_to_the_end(result)


class _Chfjpy(ExpertAdvisor):
    symbols = ("CHFJPY",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="CHFJPY")


def test_open_prices_an_inverted_margin_pair_moves_nothing_either():
    """A dollar account buys 1 lot of CHFJPY at 160.000: its yen profit converts through USDJPY (150.000,
    divided), its franc margin through USDCHF (0.90, inverted): 100,000 CHF / 100 = 1,000 CHF at 1 / 0.90
    = 1,111.11 USD. CHFJPY at 159.000 loses 100,000 JPY / 150 = 666.67 USD: equity 1,300 - 666.67 = 633.33,
    a level of 57.00 %. USDCHF falls to 0.70 inside the fourth bar (the franc dearer): re-converted, the
    margin would be 1,428.57 USD and the level 44.33 %, a stop-out; as charged it stays 57.00 %."""
    at_159 = {2: (160.0, 160.0, 159.0, 159.0), 3: (159.0,) * 4, 4: (159.0,) * 4,
              5: (159.0, 160.0, 159.0, 160.0)}  # fmt: skip
    frames = {
        "CHFJPY": _hours("CHFJPY", 160.0, at_159, digits=3),
        "USDJPY": _hours("USDJPY", 150.0, {}, digits=3),
        "USDCHF": _hours("USDCHF", 0.9, {3: (0.9, 0.9, 0.7, 0.9)}),
    }
    account = AccountConfig(deposit=1_300.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = Backtest(frames, _Chfjpy, account=account, forward=None).run()
    trade = result.trades.iloc[0]
    assert trade["exit_reason"] == "end of test" and trade["profit"] == pytest.approx(0.0)
    assert result.stats["margin_level_min_pct"] == pytest.approx(57.00)


def test_ticks_a_margin_pair_without_a_quote_yet_refuses_the_request():
    """EURGBP's first tick is at 01:00:00, where the EA decides (GBPUSD's came before); EURUSD, which
    converts only its margin, has its first tick at 01:05:00: the buy is refused with 10021 naming EURUSD
    (its margin would have been charged at that later tick)."""
    rows = {
        "EURGBP": [(H, 0.85), (2 * H, 0.85), (3 * H, 0.85), (4 * H - 1, 0.85)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H, 1.3), (3 * H, 1.3), (4 * H - 1, 1.3)],
        "EURUSD": [(H + 300, 1.1), (2 * H, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)],
    }
    ticks = {s: _tick_rows(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}

    class _AtOne(_Cross):
        def on_bar(self):
            if self.time_current == T0 + pd.Timedelta(hours=1):
                self.buy(1.0, symbol="EURGBP")

    result = Backtest(frames, _AtOne, model="ticks", ticks=ticks, account=ACCOUNT, forward=None).run()
    assert len(result.trades) == 0
    (refused,) = result.rejected
    assert (refused["symbol"], refused["retcode"]) == ("EURGBP", 10021)
    assert "EURUSD" in refused["reason"]


def test_the_pairs_moving_a_desks_money_are_its_profit_pairs_only():
    """The one owner of which pairs move a symbol's money once its positions are open: EURGBP's GBPUSD (its
    profit), never EURUSD (its margin, charged at the deal), though its deals read both; USDJPY converts
    through itself and EURUSD needs no conversion on a dollar account."""
    names = ("EURGBP", "GBPUSD", "EURUSD", "USDJPY")
    columns = {}
    for name in names:
        frame = _hours(name, 1.0, {})
        prices = (frame[c].to_numpy() for c in ("open", "high", "low", "close"))
        columns[name] = (*prices, np.zeros(len(frame)), frame.index)
    specs = {name: BUILTIN[name] for name in names}
    desks = open_brokers(columns, specs, ACCOUNT, UTC)
    assert money_pairs(desks["EURGBP"]) == (desks["GBPUSD"],)
    assert priced_through(desks["EURGBP"]) == (desks["GBPUSD"], desks["EURUSD"])
    assert money_pairs(desks["USDJPY"]) == priced_through(desks["USDJPY"]) == ()
    assert money_pairs(desks["EURUSD"]) == priced_through(desks["EURUSD"]) == ()
    assert moved_by(desks.values(), desks["GBPUSD"]) == [desks["EURGBP"]]
    assert moved_by(desks.values(), desks["EURUSD"]) == []


@pytest.mark.parametrize("bad", [0.0, float("nan"), -1.0])
def test_a_margin_pairs_bar_that_cannot_be_traded_on_is_refused_naming_the_pair(bad):
    """EURUSD, loaded only to convert EURGBP's margin, has a bar of ``bad`` prices: refused before the run in
    one line naming EURUSD and the bar (the line named no symbol, so a user could not tell which file)."""
    frames = {
        "EURGBP": _hours("EURGBP", 0.85, {}),
        "GBPUSD": _hours("GBPUSD", 1.3, {}),
        "EURUSD": _hours("EURUSD", 1.1, {1: (bad,) * 4}),
    }
    line = r"^EURUSD: bar 1 \(2024-01-02 01:00:00\+00:00\): open .* cannot be traded on"
    with pytest.raises(BarPriceError, match=line):
        Backtest(frames, _Cross, account=ACCOUNT, forward=None).run()
