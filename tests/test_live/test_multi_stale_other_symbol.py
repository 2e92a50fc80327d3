"""A several-symbol paper run where another symbol's quote at a bar's open is a second old.

Ticks of different symbols are not simultaneous: when the main chart's bar opens, another symbol's last
tick is very often stamped a moment before that open. That quote is the symbol's price now, the one a live
order would get: taken as "no market" (10018, as the backtest's market closed), the symbol's bar would be
kept flat at its last close when the bar closes, its range never checked, so a stop loss the market crossed
in that bar would be taken an hour later at the next open, unlike the backtest of the same bars.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_live.live_support import OPEN_SOURCES
from test_live.test_multi_runner import multi_runner

from backtests import AccountConfig, Backtest
from datafeeds.symbols import SymbolSpec
from datafeeds.terminal import TerminalSource
from neuronet.live.journal import read_journal
from strategies.base import ExpertAdvisor


class _BuysGbpWithATightStop(ExpertAdvisor):
    """Buys 0.1 lot of GBPUSD at its first bar (08:00 UTC) with a stop loss at ``SL``."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1",)

    def on_bar(self) -> None:
        if not getattr(self, "bought", False):
            self.bought = True
            self.buy(0.1, symbol="GBPUSD", sl=SL)


SL = 1.24950  # below the 08:00 bar's low (1.24977), above the 09:00 bar's (1.24790) and the 10:00 open
# GBPUSD's quote at the second bar's open, stamped one second before that open (the next hour's start).
STALE_AT_SECOND_OPEN = "{'time': (_m.SIM.book.quote('GBPUSD')[0] // 3600 + 1) * 3600 - 1}"


def _backtest(port, run, journal):
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    candles = {}
    for name in _BuysGbpWithATightStop.symbols:
        feed = run.views.feeds[(name, "H1")]
        df = source.fetch(name, "H1").frame
        candles[name] = df[(df.index >= feed.time[0]) & (df.index <= feed.time[-1])]
    start = read_journal(journal)[0]
    specs = {k: SymbolSpec(**v) for k, v in start["specs"].items()}
    fs = candles["EURUSD"].index[start["forward_start"]]
    bt = Backtest(candles, _BuysGbpWithATightStop, account=AccountConfig(), forward=fs, specs=specs)
    return bt.run(), candles


def test_a_stop_crossed_in_a_bar_opened_on_a_second_old_quote_is_taken_in_that_bar(
    mt5_server, sim, tmp_path, bad_quotes
):
    bad_quotes("{}", "{}", "{}", STALE_AT_SECOND_OPEN)  # EURUSD, GBPUSD at the 1st open, then the 2nd's
    journal = tmp_path / "j.jsonl"
    run = multi_runner(mt5_server[1], sim, journal, ea=_BuysGbpWithATightStop, params={}, max_bars=4)
    run.run()
    opens = [r for r in read_journal(journal) if r["type"] == "open"]
    assert opens[1]["quotes"]["GBPUSD"] is not None  # the second bar: GBPUSD's second-old quote is taken
    want, candles = _backtest(mt5_server[1], run, journal)
    gbp = candles["GBPUSD"]
    first, second = pd.Timestamp(opens[0]["time"]), pd.Timestamp(opens[1]["time"])
    third = second + pd.Timedelta(hours=1)
    # The premises, from the terminal's own GBPUSD bars: the stop holds in the first bar, the second bar's
    # range crosses it, the third opens below it.
    assert gbp.loc[first, "low"] > SL > gbp.loc[second, "low"] and gbp.loc[second, "open"] > SL
    assert gbp.loc[third, "open"] < SL
    (stop,) = want.trades.itertuples()
    assert (stop.exit_time, stop.exit_price, stop.exit_reason) == (second, SL, "sl")  # the backtest
    deals = run.paper.brokers["EURUSD"].deals_frame()
    (exit_deal,) = deals[deals["entry"] == "out"].itertuples()
    # Paper: at the stop's price, in the second bar, as the backtest of the same bars (before: at the third
    # bar's open, 1.24907, 4.3 pips below the stop: -4.30 USD more on 0.1 lot, an hour later).
    assert (exit_deal.time, exit_deal.price) == (second, pytest.approx(SL))
