"""The backtest harness: replay, simulated broker, MetaTrader-style statistics and reports."""

from backtests.broker import AccountConfig
from backtests.periods import PeriodError
from backtests.replay import Backtest, EARuntimeError, IndicatorError, LookAheadError, Result
from backtests.report import write_report

__all__ = [
    "AccountConfig",
    "Backtest",
    "EARuntimeError",
    "IndicatorError",
    "LookAheadError",
    "PeriodError",
    "Result",
    "write_report",
]
