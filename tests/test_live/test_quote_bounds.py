"""Quotes far from the bars, or stamped far from the bar the terminal forms, are refused on paper and live:
journaled, never filled, and never allowed to move the server day a daily loss limit counts by."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_live.live_support import backtest_of, plan_quotes, runner, same_frames
from test_live.test_account_report import live_run

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.quotes import QuoteBounds, QuoteError
from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

BAR = pd.Timestamp("2024-03-07 08:00", tz="UTC")
TEN_TIMES = "{'bid': 11.70, 'ask': 11.7002}"  # the bars trade at 1.17


def test_the_band_is_twice_the_recent_range_beyond_it():
    bounds = QuoteBounds.of(np.array([1.20, 1.21]), np.array([1.18, 1.19]), 1.20, BAR, 3600)
    # range 1.21 - 1.18 = 0.03 (more than 1% of 1.20): the band is 1.18 - 0.06 .. 1.21 + 0.06
    assert (bounds.low, bounds.high) == pytest.approx((1.12, 1.27))
    bounds.check_prices("EURUSD", 1.1201, 1.2699)
    for bid, ask in ((11.70, 11.7002), (0.117, 0.11702), (1.1199, 1.1201), (1.2690, 1.2701)):
        with pytest.raises(QuoteError, match="far from the recent bars"):
            bounds.check_prices("EURUSD", bid, ask)


def test_a_flat_history_still_leaves_a_band_of_two_percent():
    bounds = QuoteBounds.of(np.full(5, 1.0), np.full(5, 1.0), 1.0, BAR, 3600)
    assert (bounds.low, bounds.high) == pytest.approx((0.98, 1.02))


def test_the_range_is_of_the_last_100_bars_or_a_server_day_of_bars_when_more():
    highs = np.r_[np.full(2000, 2.0), np.full(2000, 1.2)]  # long ago the price was 2.0
    lows = np.r_[np.full(2000, 1.0), np.full(2000, 1.1)]
    h1 = QuoteBounds.of(highs, lows, 1.15, BAR, 3600)  # the last 100 bars: 1.1 .. 1.2
    assert (h1.low, h1.high) == pytest.approx((0.9, 1.4))
    lows[-1440] = 1.0  # a day of M1 bars reaches it, 100 H1 bars do not
    m1 = QuoteBounds.of(highs, lows, 1.15, BAR, 60)
    assert (m1.low, m1.high) == pytest.approx((0.6, 1.6))


def test_a_quote_time_is_checked_against_the_bar_the_terminal_forms():
    bounds = QuoteBounds(BAR, 3600, 1.0, 1.3)
    bounds.check("EURUSD", BAR + pd.Timedelta(minutes=90), 1.17, 1.1702)
    with pytest.raises(QuoteError, match="in the future"):
        bounds.check("EURUSD", BAR + pd.Timedelta(days=1), 1.17, 1.1702)
    with pytest.raises(QuoteError, match="stale"):
        bounds.check("EURUSD", BAR - pd.Timedelta(hours=3), 1.17, 1.1702)


def test_the_server_day_of_a_request_is_held_within_the_forming_bar():
    bounds = QuoteBounds(BAR, 3600, 1.0, 1.3)
    day = 19_789  # 2024-03-07 in broker time
    opened = day * 86400 + 23 * 3600  # the 23:00 bar
    assert bounds.server_day(opened + 1800, opened) == day
    assert bounds.server_day(opened + 3600 + 1800, opened) == day  # a quote stamped past midnight
    assert bounds.server_day(opened + 86400, opened) == day  # or a day ahead
    assert bounds.server_day(opened - 86400, opened) == day


def test_a_quote_ten_times_off_is_refused_and_never_filled_on_paper(port, sim, tmp_path, bad_quotes):
    """The paper account bought at 11.70 while the bars traded at 1.17, and was stopped out at a price
    that never existed: -9,415 USD. The quote is now refused, journaled, and the bar decided later."""
    journal = tmp_path / "run.jsonl"
    bad_quotes(*[TEN_TIMES] * 3)
    runner(port, sim, journal, max_bars=30).run()
    said = [r["message"] for r in read_journal(journal) if r["type"] == "warning"]
    assert any("far from the recent bars" in m for m in said)
    opens = [r for r in read_journal(journal) if r["type"] == "open"]
    assert all(math.isfinite(r["bid"]) and 1.0 < r["bid"] <= r["ask"] < 1.3 for r in opens)
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)


class _BuysAtAPlannedQuote(ExpertAdvisor):
    """Buys 0.1 lots at a quote the test plans (``QUOTE``), once."""

    QUOTE = TEN_TIMES

    def on_bar(self) -> None:
        if not self.positions() and not getattr(self, "tried", False):
            self.tried = True
            plan_quotes(self.sim, *[self.QUOTE] * 4)
            self.buy(0.1)


def test_a_live_request_at_a_quote_ten_times_off_is_refused_with_no_quotes(port, sim, tmp_path, bad_quotes):
    journal = tmp_path / "live.jsonl"
    _BuysAtAPlannedQuote.sim = sim
    try:
        live_run(port, sim, journal, ea=_BuysAtAPlannedQuote, params={}, bars=3)
    finally:
        del _BuysAtAPlannedQuote.sim
    assert not sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD")
    assert sim.state.call_count("order_check") == 0
    (result,) = [r for r in read_journal(journal) if r["type"] == "result" and r.get("call") == "order"]
    assert result["value"] is None and result["retcode"] == 10021
    refused = [
        r["terminal"] for r in read_journal(journal) if (r.get("terminal") or {}).get("event") == "refused"
    ]
    assert "far from the recent bars" in refused[0]["reason"]


HALT = Limits(max_lots=1.0, max_positions=2, max_daily_loss=0.01, symbols=("EURUSD",))


class _ChurnThenJump(ExpertAdvisor):
    """Buys and closes on alternate bars until the daily loss halt refuses it; then makes the terminal's
    quote read a day ahead (a clock jump) and buys again."""

    def on_bar(self) -> None:
        if self.positions():
            self.close()
        elif getattr(self, "halted", False):
            ahead = int(self.sim.market.now_broker()) + 86400
            plan_quotes(self.sim, *[f"{{'time': {ahead}}}"] * 4)
            self.buy(0.1)
        elif self.buy(0.1) is None and self.last_retcode == 10027:
            self.halted = True


def test_a_quote_stamped_a_day_ahead_does_not_lift_the_daily_loss_halt(port, sim, tmp_path, bad_quotes):
    journal = tmp_path / "live.jsonl"
    _ChurnThenJump.sim = sim
    try:
        live_run(port, sim, journal, ea=_ChurnThenJump, params={}, limits=HALT, bars=8)
    finally:
        del _ChurnThenJump.sim
    records = read_journal(journal)
    orders = [r for r in records if r["type"] == "result" and r.get("call") == "order"]
    first_halt = next(i for i, r in enumerate(orders) if r["retcode"] == 10027)
    after = orders[first_halt + 1 :]
    assert after and all(r["value"] is None for r in after)  # nothing went out after the halt
    assert any(r["retcode"] == 10021 for r in after)  # the jumped quote itself was refused
    notes = [r["terminal"] for r in records if (r.get("terminal") or {}).get("event") == "refused"]
    assert any("in the future" in n["reason"] for n in notes)
    deals = sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ()
    entries = [d for d in deals if int(d.entry) == 0]
    assert len(entries) == sum(r["value"] is not None for r in orders[:first_halt])
