"""What a live run's engine and its part share, each named with its type: one record given to the part once.

A live run is one engine (``engine.LiveEngine``: the loop, the journal, resume, the retries, the clock) and
one part (``engine.Chart``: one symbol's ``runner.LiveRunner`` or several symbols' ``multi_runner
.MultiLiveRunner``). Before anything runs, the engine gives its part two things (``Chart.attach``), and the
part reaches the engine through nothing else:

- ``SharedState``: the run's inputs (the EA class and its parameters, the terminal, the settings, the live
  trade context factory) and the state both read and write as the run goes (the journal, the bars, the EA,
  its trade context, the bar forming, ...): one owner for each of these facts, the record;
- ``Lifecycle``: what the engine does for the part (terminal calls that survive drops, a decision on a
  bar, a study, a refused quote journaled, the account journaled, the trade context's records journaled).

So what a part depends on is in one signature, and a test (``tests/test_live/test_engine_parts.py``) holds
each part to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from backtests.broker import AccountConfig
from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.context import LiveBars
from neuronet.live.errors import LiveError
from neuronet.live.journal import Journal
from neuronet.live.quotes import FRESH, QuoteError
from strategies.base import ExpertAdvisor

# The command-line option of each setting, named in errors (the settings are also set from Python).
_OPTION = {
    "poll_s": " (--poll)",
    "history_bars": " (--history)",
    "study_bars": " (--study-bars)",
    "max_bars": " (--max-bars)",
    "max_quote_age": " (--max-quote-age)",
}


@dataclass(frozen=True)
class LiveSettings:
    """How a live run goes (times in seconds); ``symbol``/``timeframe``: the main chart."""

    symbol: str
    timeframe: Timeframe
    journal: Path
    mode: str = "paper"  # "paper" (the backtest broker on live prices) or "live" (the terminal trades)
    account: AccountConfig = field(default_factory=AccountConfig)
    history_bars: int = 0  # closed bars taken from the terminal at the start; 0 = all it holds
    study_bars: int = 0  # bars of on_study's window; 0 = the whole history
    poll_s: float = 1.0  # between two looks at the terminal
    backoff_s: float = 1.0  # first wait after a dropped link; doubled after each failure
    backoff_max_s: float = 60.0
    skip_missed: bool = False  # bars closed while unreachable: skipped (True) or processed in order
    close_on_exit: bool = False
    max_bars: int | None = None  # stop after this many bars closed (None: until Ctrl-C)
    max_quote_age: float = FRESH  # paper: how much older than the bar's open a fill's quote may be

    def fill_age(self) -> float | None:
        """The ``max_age`` a quote is checked with (``quotes.check_time``): a paper fill's; None on a live
        account, where the terminal fills at its own price (its quotes checked as ``TerminalTrade`` does)."""
        return self.max_quote_age if self.mode == "paper" else None

    def __post_init__(self) -> None:
        if not isinstance(self.symbol, str) or not self.symbol.strip():
            raise LiveError(f"symbol (--symbol) must name a symbol, not {self.symbol!r}")
        if self.mode not in ("paper", "live"):
            raise LiveError(f"mode must be 'paper' or 'live', not {self.mode!r}")
        for name in ("poll_s", "backoff_s", "backoff_max_s", "max_quote_age"):
            value = getattr(self, name)
            if not value >= 0:
                raise LiveError(f"{name}{_OPTION.get(name, '')} must be >= 0 seconds, not {value!r}")
        if not math.isfinite(self.max_quote_age):
            raise LiveError("max_quote_age (--max-quote-age) must be a finite number of seconds")
        for name, least in (("history_bars", 0), ("study_bars", 0), ("max_bars", 1)):
            value = getattr(self, name)
            if value is not None and value < least:
                raise LiveError(f"{name}{_OPTION[name]} must be >= {least}, not {value}")


@dataclass
class LiveSummary:
    """What a run did (this session only)."""

    journal: Path
    bars_closed: int = 0
    decisions: int = 0
    missed: int = 0
    skipped: int = 0
    reconnects: int = 0
    resumed: bool = False
    interrupted: bool = False


@dataclass
class SharedState:
    """The state a live run's engine and its part share (module docstring). The inputs are the engine's,
    set once; the rest starts empty and is set by the part as the run begins (``Chart.begin``: the bars,
    the EA, its context, the retraining rule, the bar forming, the bars decided) and moved on by both."""

    ea_class: type[ExpertAdvisor]
    params: dict[str, Any]
    source: TerminalSource
    settings: LiveSettings
    trading_factory: Callable[..., Any] | None  # live: the trade context factory (``engine.LiveEngine``)
    summary: LiveSummary
    journal: Journal | None = None  # open while the run runs
    started: bool = False  # past on_init: a dropped link is waited out from now on
    begun: bool = False  # the journal has this run's start (or resume): a stop may follow it
    market_bar: pd.Timestamp | None = None  # UTC open of the bar the terminal forms, last read
    bars: LiveBars | None = None  # the main chart's closed bars and the EA's indicators
    ea: ExpertAdvisor | None = None
    ctx: Any = None  # the EA's trade context (``LiveContext`` or ``MultiLiveContext``)
    periods: Any = None  # the backtest's retraining rule over the live bars (``Periods.for_ea``)
    forming: tuple[int, pd.Timestamp] | None = None  # the bar decided on and not closed yet
    decided: set[int] = field(default_factory=set)  # bars whose on_bar finished (this session, or read back)
    last_refusal: str | None = None  # the quote refusal last journaled (not repeated while it repeats)

    def now(self) -> pd.Timestamp:
        """The open of the bar forming, or the last closed bar's."""
        return self.forming[1] if self.forming else self.bars.feed.time[-1]

    def bar(self) -> int:
        """The bar forming, or the last closed one."""
        return self.forming[0] if self.forming else len(self.bars.feed) - 1


class Lifecycle(Protocol):
    """What the engine does for its part (``engine.LiveEngine`` is one)."""

    def retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """``call()`` at the terminal, waited out with backoff after a dropped link (each retry journaled)."""

    def decide(self, t: int, when: pd.Timestamp, *, missed: bool = False) -> None:
        """``on_bar`` on bar ``t`` opened at ``when`` (``missed``: it closed before it was decided on)."""

    def study(self, t: int, when: pd.Timestamp) -> None:
        """``on_study`` before bar ``t`` on the backtest's study window."""

    def refused_quote(self, exc: QuoteError, then: str) -> None:
        """A refused quote logged and journaled (once while the same refusal repeats)."""

    def journal_account(self, account: Callable[[], Any]) -> None:
        """A live run's magic number and the account it starts on, journaled."""

    def record_trade(self, record: dict) -> None:
        """The terminal trade context's own records (requests sent, answers), journaled."""


class SharedField:
    """A part's attribute that is the shared state's (``part.shared.<name>``), for those that hold the part
    (the command line, tests): read and set there, so the record stays the one owner. The part's own code
    reads ``self.shared`` itself."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, part: Any, owner: type | None = None) -> Any:
        return self if part is None else getattr(part.shared, self.name)

    def __set__(self, part: Any, value: Any) -> None:
        setattr(part.shared, self.name, value)
