"""Expert advisors: the base class users subclass, indicators with MetaTrader's definitions, built-in EAs."""

from strategies.base import Account, Bars, EAError, ExpertAdvisor, Line, Position
from strategies.sma import SmaCrossEA

__all__ = ["Account", "Bars", "EAError", "ExpertAdvisor", "Line", "Position", "SmaCrossEA"]
