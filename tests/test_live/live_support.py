"""Shared helpers of the live tests: a paper runner on the simulated terminal, and the backtest of the
same bars."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from backtests import AccountConfig, Backtest
from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.rebuild import read_state
from neuronet.live.runner import LiveRunner, LiveSettings
from neuronet.live.terminal_trade import TerminalTrade
from strategies.sma import SmaCrossEA

PARAMS = {"fast": 5, "slow": 12}
MAGIC = 20240101  # a live run's EA has its own magic number (0 is what trades placed by hand carry)
LIVE_PARAMS = {**PARAMS, "magic": MAGIC}
OPEN_SOURCES: list[TerminalSource] = []  # closed after each test (conftest), so no link is left to the GC


def runner(
    port: int, sim, journal: Path, *, ea=SmaCrossEA, params=PARAMS, lines=None, sleep=None, **settings
) -> LiveRunner:
    settings.setdefault("history_bars", 300)
    settings.setdefault("max_bars", 40)
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    s = LiveSettings("EURUSD", Timeframe.parse("H1"), journal, **settings)
    status = lines.append if lines is not None else None
    return LiveRunner(ea, params, source, s, sleep=sleep or sim.sleep, status=status)


def backtest_of(journal: Path, ea=SmaCrossEA, params=PARAMS, account: AccountConfig | None = None):
    """The backtest over exactly the journal's bars, forward from the run's first live bar."""
    state = read_state(str(journal), read_journal(journal))
    bars = state.bars
    bt = Backtest(bars, ea, account=account or AccountConfig(), forward=bars.index[state.forward_start])
    return bt.run(**params), state


def same_frames(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def plan_quotes(sim, *quotes: str) -> None:
    """The simulated terminal's next ``symbol_info_tick`` answers, in order, each Python source of None or
    a dict of Tick fields (``MetaTrader5.BAD_QUOTES``); none given: the market's quotes again."""
    sim.conn.execute(f"import MetaTrader5 as _m\n_m.BAD_QUOTES[:] = [{', '.join(quotes)}]")


def one_lot_limits(symbol: str = "EURUSD") -> Limits:
    """1 lot and one position at most, a daily loss no test reaches: the limits of the lost-reply tests."""
    return Limits(max_lots=1.0, max_positions=1, max_daily_loss=10_000.0, symbols=(symbol,))


def quick_trading(limits: Limits, **trade_kw):
    """The runner's ``trading=`` factory: a terminal trade context per symbol on the terminal's clock, which
    looks a lost reply up after 0.2 s and retries after 0.01 s (the tests' simulated delays)."""

    def factory(src, symbol, magic, record, *, market):
        return TerminalTrade(
            src, symbol, magic=magic, limits=limits, record=record, clock=src.clock, market=market,
            lost_reply_wait=0.2, backoff=0.01, **trade_kw,
        )  # fmt: skip

    return factory
