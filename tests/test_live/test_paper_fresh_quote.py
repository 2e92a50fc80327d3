"""A paper fill never takes a quote older than the bar it fills at: a stale price is money the account could
never have had.

The paper account fills at the terminal's quote as the backtest fills at the bar's open, and the quote was
accepted when stamped up to one bar before that open: a quote of the bar before, 50 points below the
market, bought 1 lot 50 points cheaper than any price the market offered at the decision (about +500 USD
that never existed). Now a paper fill takes a quote stamped at or after the bar's open, or at most
``max_quote_age`` (``--max-quote-age``) seconds before it; an older one is refused, journaled with its
reason, and the bar is decided on a fresh quote or, once it has closed, at its own open as a missed bar is.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_live.live_support import backtest_of, runner, same_frames

from datafeeds.timeframes import Timeframe
from neuronet.live.errors import LiveError
from neuronet.live.journal import read_journal
from neuronet.live.quotes import QuoteError, check_time
from neuronet.live.report import journal_result
from neuronet.live.shared_state import LiveSettings
from strategies.base import ExpertAdvisor

BAR = pd.Timestamp("2024-03-07 08:00", tz="UTC")
# The market's quote with its time one second before the bar forming opened and its prices 50 points
# (0.0050) lower: a quote of the bar before (evaluated in the simulator when planned, at the bar's open).
STALE = (
    "dict(zip(('time', 'bid', 'ask'), (lambda q: (q[0] - 1, round(q[1] - 0.005, 5), round(q[2] - 0.005, 5)))"
    "(_m.SIM.book.quote('EURUSD'))))"
)


class _BuysOnce(ExpertAdvisor):
    """Buys 1 lot at its first decision."""

    def on_bar(self) -> None:
        if not getattr(self, "bought", False):
            self.bought = True
            self.buy(1.0)


def test_a_quote_older_than_the_bar_open_is_refused_unless_within_the_age():
    check_time("EURUSD", BAR, BAR, 3600, 0.0)  # stamped at the open
    check_time("EURUSD", BAR - pd.Timedelta(seconds=5), BAR, 3600, 5.0)  # 5 s before, 5 s allowed
    with pytest.raises(QuoteError, match="stale for a paper fill"):
        check_time("EURUSD", BAR - pd.Timedelta(seconds=1), BAR, 3600, 0.0)
    with pytest.raises(QuoteError, match="stale for a paper fill"):
        check_time("EURUSD", BAR - pd.Timedelta(seconds=6), BAR, 3600, 5.0)
    check_time("EURUSD", BAR - pd.Timedelta(minutes=59), BAR, 3600)  # a live account's check: one bar


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_quote_age_that_is_not_a_finite_number_of_seconds_is_refused_by_name(bad, tmp_path):
    with pytest.raises(LiveError, match="max-quote-age"):
        LiveSettings("EURUSD", Timeframe.H1, tmp_path / "j.jsonl", max_quote_age=bad)


def _first_open(journal):
    return next(r for r in read_journal(journal) if r["type"] == "open")


def test_a_paper_fill_at_a_stale_quote_is_refused_and_waits(port, sim, tmp_path, bad_quotes):
    """Bar 10:00 (broker) opens; its first quote is stamped 09:59:59 and 50 points low. Refused and
    journaled: the bar is decided at the next look, on the market's own quote (1.16968 here, not 1.16468),
    and the 1 lot is bought at that quote's ask; the paper run equals the backtest of the same bars."""
    journal = tmp_path / "paper.jsonl"
    bad_quotes(STALE)
    market_bid = float(sim.state.book.quote("EURUSD")[1])
    runner(port, sim, journal, ea=_BuysOnce, params={}, max_bars=3).run()
    said = [r["message"] for r in read_journal(journal) if r["type"] == "warning"]
    assert any("stale for a paper fill" in m for m in said)
    opened = _first_open(journal)
    assert opened["bid"] == pytest.approx(market_bid)  # the market's own quote, at the next look
    got = journal_result(journal)
    assert got.trades["entry_price"].iloc[0] == pytest.approx(opened["ask"])
    bt, _ = backtest_of(journal, ea=_BuysOnce, params={})
    assert len(got.trades) == 1
    same_frames(got.trades, bt.trades)


def test_a_quote_within_the_allowed_age_fills(port, sim, tmp_path, bad_quotes):
    """The same quote, one second older than the bar's open, with ``max_quote_age`` 5 s: it is fresh
    enough, and the 1 lot is bought at its ask (market ask - 0.0050)."""
    journal = tmp_path / "paper.jsonl"
    bad_quotes(STALE)
    _, bid, ask = sim.state.book.quote("EURUSD")
    bid, ask = round(float(bid) - 0.005, 5), round(float(ask) - 0.005, 5)
    runner(port, sim, journal, ea=_BuysOnce, params={}, max_bars=3, max_quote_age=5.0).run()
    opened = _first_open(journal)
    assert opened["missed"] is False and (opened["bid"], opened["ask"]) == pytest.approx((bid, ask))
    got = journal_result(journal)
    assert got.trades["entry_price"].iloc[0] == pytest.approx(ask)
    assert not any("stale" in r.get("message", "") for r in read_journal(journal) if r["type"] == "warning")
