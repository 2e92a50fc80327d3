"""Multi-symbol EAs of the live tests (importable by a test's own subprocess too)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from strategies.base import ExpertAdvisor

# Not class attributes (those are the EA's parameters, part of a journal's identity): switches of a test.
DIE_AFTER = "MULTI_EAS_DIE_AFTER"  # environment: a file whose existence kills the process mid-bar
STOP = {"midway": False}  # StopMidway stops once, then no more


class EachOnce(ExpertAdvisor):
    """Buys 0.1 lots of each of its symbols that it holds none of, one after the other, every bar. Where
    the file named by the ``MULTI_EAS_DIE_AFTER`` variable exists, the process deletes it and kills itself
    (SIGKILL) right after its first symbol's order: a crash in the middle of a multi-symbol bar."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    timeframes = ("H1",)
    magic: int = 4242

    def on_bar(self) -> None:
        for i, symbol in enumerate(self.symbols):
            if not self.positions(symbol):
                self.buy(0.1, symbol=symbol, comment=f"each {symbol}")
                if i == 0:
                    self.after_first()

    def after_first(self) -> None:
        flag = os.environ.get(DIE_AFTER)
        if flag and Path(flag).exists():
            Path(flag).unlink()
            os.kill(os.getpid(), signal.SIGKILL)


class BuyAll(EachOnce):
    """Buys 0.1 lots of every symbol at every bar, whatever it holds: a request made twice would show."""

    def on_bar(self) -> None:
        for i, symbol in enumerate(self.symbols):
            self.buy(0.1, symbol=symbol, comment=f"all {symbol}")
            if i == 0:
                self.after_first()


class StopMidway(BuyAll):
    """Stops (Ctrl-C) right after its first symbol's order, once: ``on_bar`` cut short."""

    def after_first(self) -> None:
        if not STOP["midway"]:
            STOP["midway"] = True
            raise KeyboardInterrupt
