"""The backtest harness: replay, simulated broker, MetaTrader-style statistics and reports."""

from backtests.broker import AccountConfig
from backtests.replay import Backtest, EARuntimeError, LookAheadError, Result

__all__ = ["AccountConfig", "Backtest", "EARuntimeError", "LookAheadError", "Result"]
