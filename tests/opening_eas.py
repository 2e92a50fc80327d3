"""The EAs of the several-symbol opening-order tests, shared by the 1 minute OHLC and the tick walks: each
places its orders at the first decision, so the tests differ only in when each symbol's prices come."""

from __future__ import annotations

from strategies.base import ExpertAdvisor


class LimitBelow(ExpertAdvisor):
    """At the first decision: 1 lot of GBPUSD bought and a EURUSD buy limit of 1 lot at 1.09500."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD")
            self.buy_limit(1.0, 1.095, symbol="EURUSD")


class SellLimitAbove(ExpertAdvisor):
    """At the first decision: 1 lot of GBPUSD bought and an AUDUSD sell limit of 1 lot at 0.66000."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD")
            self.sell_limit(1.0, 0.66, symbol="AUDUSD")


class StopOnAQuietSymbol(ExpertAdvisor):
    """At the first decision: 1 lot of EURUSD bought and a GBPUSD buy stop of 1 lot at 1.30500."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")
            self.buy_stop(1.0, 1.305, symbol="GBPUSD")


class HoldGBP(ExpertAdvisor):
    """At the first decision: 1 lot of GBPUSD bought."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD")
