"""Attack: ``--close-on-exit`` of a several-symbol paper run when one symbol's quote at the stop is older
than the bar before the one forming (a symbol gone quiet: its last tick came over an hour ago).

The stop read every symbol's quote and refused them all when one was refused: the positions of the symbols
whose quotes were fresh were left open as well, although each could be closed at its own quote. Now each
symbol whose quote is good is closed at it; the quiet one keeps its positions, with a journaled warning, and
the journal's report (the paper account rebuilt) agrees with the run.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_live.test_multi_runner import multi_runner

from neuronet.live.journal import read_journal
from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

SIM: dict = {}
# GBPUSD's quote stamped one second before the bar before the one forming opened (an hour and a second
# before the current hour's start): stale on paper as live (a second-old quote is that symbol's price now).
STALE_GBPUSD = "{'time': _m.SIM.book.quote('GBPUSD')[0] // 3600 * 3600 - 3601}"


class _BuysBothThenStops(ExpertAdvisor):
    """Buys 0.1 lot of EURUSD and of GBPUSD at its first bar; at its second, plans the quotes the stop
    reads next: EURUSD's the market's, GBPUSD's over an hour old."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1",)

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        if self.n == 1:
            self.buy(0.1, symbol="EURUSD")
            self.buy(0.1, symbol="GBPUSD")
        elif self.n == 2:
            SIM["plan"]("{}", STALE_GBPUSD)


def test_close_on_exit_closes_the_symbols_whose_quotes_are_fresh(mt5_server, sim, tmp_path, bad_quotes):
    SIM["plan"] = bad_quotes
    journal = tmp_path / "j.jsonl"
    run = multi_runner(
        mt5_server[1], sim, journal, ea=_BuysBothThenStops, params={}, max_bars=2, close_on_exit=True
    )
    run.run()
    said = [r["message"] for r in read_journal(journal) if r["type"] == "warning"]
    assert any("GBPUSD" in m and "stale" in m for m in said), said  # the stop met the quiet quote
    held = {p.symbol for p in run.ctx.positions()}
    assert held == {"GBPUSD"}  # EURUSD closed at its own quote, GBPUSD left open
    recs = read_journal(journal)
    tick = [r for r in recs if r["type"] == "tick"][-1]
    assert set(tick["quotes"]) == {"EURUSD"}
    deals = run.paper.brokers["EURUSD"].deals_frame()
    (out,) = deals[deals["entry"] == "out"].itertuples()
    assert out.symbol == "EURUSD" and out.price == pytest.approx(tick["quotes"]["EURUSD"][0])  # its bid
    got = journal_result(journal)  # the paper account rebuilt from the journal
    rebuilt = got.deals.reset_index(drop=True)
    pd.testing.assert_frame_equal(rebuilt.iloc[: len(deals)], deals.reset_index(drop=True))
    assert list(rebuilt.iloc[len(deals) :]["symbol"]) == ["GBPUSD"]  # closed at the end, in the report only
