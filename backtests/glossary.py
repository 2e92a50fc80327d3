"""What the report's curves are; each statistic's own line lives in ``backtests.statistics.TABLE``. The
HTML report prints both under its tables, so a reader never has to guess which of two tools' definitions a
name follows."""

from __future__ import annotations

CURVES = (
    'Curves (report.json "curves", one row per forward bar after a start row: the deposit at the close of '
    "the last study bar): balance and equity at each bar's close; equity_worst with every open position at "
    "its worst price of the bar (longs at the low bid, shorts at the high ask); margin_level = equity_worst "
    '/ margin held then, in %. Trade figures use each closed trade\'s net profit (report.json "trades").'
)
