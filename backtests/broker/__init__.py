"""The simulated broker (``Broker``), its account settings (``AccountConfig``) and its position record."""

from backtests.broker.book import OpenPosition
from backtests.broker.config import AccountConfig
from backtests.broker.core import Broker

__all__ = ["AccountConfig", "Broker", "OpenPosition"]
