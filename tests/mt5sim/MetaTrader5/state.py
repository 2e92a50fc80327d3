"""The simulated terminal's state and its failure switches.

Tests drive the simulator through ``SIM`` (in-process, or over an RPyC connection as
``conn.modules.MetaTrader5.SIM``), or at import time through the ``MT5SIM`` environment variable, which
holds JSON keyword arguments for ``configure`` (for a server process started with a broken terminal).
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter

from MetaTrader5.constants import ERROR_MESSAGES, RES_S_OK
from MetaTrader5.trading import Book


class SimState:
    """What the terminal knows and how it should misbehave. All switches reset with ``reset()``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.initialized = False
            self.logged_in = True
            self.account_login, self.account_server = 5012345, "Simulated-Demo"  # who is logged in
            self.maxbars = 100_000
            self.init_error: int | None = None
            self.failures: list[tuple[str, int, int]] = []
            self.delays: dict[str, float] = {}
            self.no_history: set[tuple[str, int]] = set()  # (symbol, timeframe) with no bars at all
            self.calls: Counter[str] = Counter()
            self.begun: Counter[str] = Counter()  # calls received, counted before any delay
            self.error = (RES_S_OK, ERROR_MESSAGES[RES_S_OK])
            self.book = Book()

    def configure(
        self,
        *,
        maxbars: int | None = None,
        logged_in: bool | None = None,
        init_error: int | None = None,
        fail: tuple[tuple[str, int, int], ...] = (),
        delay: tuple[tuple[str, float], ...] = (),
        trade: dict | None = None,
        no_history: tuple[tuple[str, int], ...] = (),
    ) -> None:
        """Set switches. ``fail``: ``(function, nth_call, error_code)`` — the nth call from now fails with
        that ``last_error()`` code; code 0 makes it raise ``ConnectionResetError`` instead (a dropped link).
        ``delay``: ``(function, seconds)`` — that function sleeps before answering (a stalled terminal).
        ``trade``: the trade server's switches, ``trading.Book.configure``'s keywords (requotes, lost
        replies, market closed, ...). ``no_history``: ``(symbol, timeframe)`` pairs the terminal serves no
        bars of (a timeframe it cannot give for that symbol)."""
        with self.lock:
            self.no_history.update((str(name), int(tf)) for name, tf in no_history)
            if maxbars is not None:
                self.maxbars = int(maxbars)
            if logged_in is not None:
                self.logged_in = bool(logged_in)
            if init_error is not None:
                self.init_error = int(init_error)
            for name, nth, code in fail:
                self.failures.append((str(name), self.calls[str(name)] + int(nth), int(code)))
            for name, seconds in delay:
                self.delays[str(name)] = float(seconds)
            if trade:
                self.book.configure(**{str(k): v for k, v in dict(trade).items()})

    def call_count(self, name: str) -> int:
        with self.lock:
            return self.calls[name]

    def planned_failure(self, name: str) -> int | None:
        """Count a call to ``name``; return the error code it must fail with, if one is planned."""
        with self.lock:
            self.calls[name] += 1
            for i, (fn, at, code) in enumerate(self.failures):
                if fn == name and at == self.calls[name]:
                    del self.failures[i]
                    return code
            return None

    def set_error(self, code: int, message: str | None = None) -> None:
        self.error = (code, message or ERROR_MESSAGES.get(code, "Terminal: Call failed"))


SIM = SimState()
if os.environ.get("MT5SIM"):
    _cfg = json.loads(os.environ["MT5SIM"])
    SIM.configure(
        maxbars=_cfg.get("maxbars"),
        logged_in=_cfg.get("logged_in"),
        init_error=_cfg.get("init_error"),
        fail=tuple(tuple(f) for f in _cfg.get("fail", ())),
        delay=tuple(tuple(d) for d in _cfg.get("delay", ())),
        trade=_cfg.get("trade"),
        no_history=tuple(tuple(p) for p in _cfg.get("no_history", ())),
    )
