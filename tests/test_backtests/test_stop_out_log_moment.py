"""The stop-out's log line names the moment it happened: the minute whose price crossed the level (a bar's
late first minute, or a minute inside the bar), never the bar's opening time before that price came.

Flat minutes at the minutes given only, spread 0, leverage 500, stop-out at 50 %; a point 1.00 USD a lot.
"""

from __future__ import annotations

import logging

from strategies.base import ExpertAdvisor
from tests.opening_eas import HoldGBP
from tests.test_backtests.test_multi_minutes_openings import GBP, WALKS, H, _at
from tests.test_backtests.test_multi_minutes_openings import _run as _run_several
from tests.test_backtests.test_one_symbol_minute_openings import ROUTES
from tests.test_backtests.test_one_symbol_minute_openings import _run as _run_one


def _stop_out_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("stop out at")]


class _BuyOne(ExpertAdvisor):
    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0)


@ROUTES
def test_a_stop_out_at_a_late_first_minute_is_logged_at_that_minute(route, monkeypatch, caplog):
    """1 lot of EURUSD bought at 1.10000 at 01:00 on 1,550.00 (margin 220.00); the 02:00 bar's first minute
    is 02:07 at 1.08500: equity 50.00, 23 %: stopped out there, at 1.08500 (-1,500.00). The log said
    02:00, the bar's opening time, seven minutes before the price that crossed the level."""
    rows = [(0, 1.1), (H, 1.1), (2 * H + 7, 1.085), (3 * H, 1.1), (4 * H - 1, 1.1)]
    with caplog.at_level(logging.INFO, logger="backtests.broker"):
        result = _run_one(_BuyOne, rows, route, monkeypatch, deposit=1_550.0)
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("stop out", _at(2 * H + 7))
    assert trade["profit"] == -1_500.0
    lines = _stop_out_lines(caplog)
    assert lines and all(line.startswith(f"stop out at {_at(2 * H + 7)}:") for line in lines), lines


@WALKS
def test_a_stop_out_inside_a_bar_is_logged_at_its_minute(every_minute, monkeypatch, caplog):
    """GBPUSD (``GBP``) stopped out at 02:02, its second minute of the 02:00 bar: the log said 02:00."""
    eur = [(0, 1.1), (H, 1.1), (2 * H, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    with caplog.at_level(logging.INFO, logger="backtests.broker"):
        result = _run_several(HoldGBP, {"EURUSD": eur, "GBPUSD": GBP}, 1_550.0, every_minute, monkeypatch)
    assert result.trades.iloc[0]["exit_time"] == _at(2 * H + 2)
    lines = _stop_out_lines(caplog)
    assert lines and all(line.startswith(f"stop out at {_at(2 * H + 2)}:") for line in lines), lines
