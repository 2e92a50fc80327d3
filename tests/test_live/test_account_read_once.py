"""A multi-symbol live request reads the whole account from the terminal once: its daily loss halt, its
account-wide limits and its own symbol's limits are judged on that one read.
Counted at the real RPyC terminal simulator."""

from __future__ import annotations

from test_live.live_support import OPEN_SOURCES

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.journal import read_journal
from neuronet.live.limits import AccountLimits, Limits
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.runner import LiveSettings
from neuronet.live.terminal_trade import TerminalTrade
from strategies.base import ExpertAdvisor

# The day's deals of a symbol are read with a date range (two positional arguments, no keywords); a
# deal or position looked up after a fill is read by keyword and is not counted.
COUNTING = """
import MetaTrader5 as _m
_day_reads = []
_real_deals = _m.history_deals_get
def _counted(*args, **kwargs):
    if len(args) == 2 and not kwargs:
        _day_reads.append(args)
    return _real_deals(*args, **kwargs)
_m.history_deals_get = _counted
_book_reads = []
_real_positions, _real_orders = _m.positions_get, _m.orders_get
def _book(real):
    def read(*args, **kwargs):
        if "symbol" in kwargs:
            _book_reads.append(kwargs["symbol"])
        return real(*args, **kwargs)
    return read
_m.positions_get, _m.orders_get = _book(_real_positions), _book(_real_orders)
"""
SEEN: dict[str, int] = {}


class _TwoSymbols(ExpertAdvisor):
    """At its first bar: one reading of the account, then one order on its second symbol, each counted."""

    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1",)
    magic: int = 5151

    def on_bar(self) -> None:
        if "one request" in SEEN:
            return
        reads, book = SEEN["count"], SEEN["book"]
        before, books = reads(), book()
        SEEN["run"].account_state()
        SEEN["one reading"], SEEN["one book"] = reads() - before, book() - books
        before, books = reads(), book()
        self.buy(0.1, symbol="GBPUSD", comment="counted")
        SEEN["one request"], SEEN["one request's book"] = reads() - before, book() - books


def _counted_run(ea: type[ExpertAdvisor], port, sim, tmp_path):
    """One bar of ``ea`` live on the simulator, its account reads counted (``SEEN``); its journal."""
    sim.conn.execute(COUNTING)
    SEEN.clear()
    try:
        source = TerminalSource("127.0.0.1", port, retries=0, timeout=5.0, backoff=0.01)
        OPEN_SOURCES.append(source)
        limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=10_000.0, symbols=_TwoSymbols.symbols)
        holder: dict = {}

        def factory(src, symbol, magic, record, *, market):
            checked = AccountLimits(limits, 3, lambda day=None: holder["run"].account_state(day))
            return TerminalTrade(
                src, symbol, magic=magic, limits=checked, record=record, clock=src.clock, market=market
            )

        journal = tmp_path / "run.jsonl"
        settings = LiveSettings("EURUSD", Timeframe.H1, journal, mode="live", history_bars=100, max_bars=1)
        run = MultiLiveRunner(ea, {}, source, settings, trading=factory, sleep=sim.sleep,
                              status=lambda _: None)  # fmt: skip
        holder["run"] = SEEN["run"] = run
        SEEN["count"] = lambda: len(sim.conn.namespace["_day_reads"])
        SEEN["book"] = lambda: len(sim.conn.namespace["_book_reads"])
        run.run()
    finally:
        sim.conn.execute("_m.history_deals_get = _real_deals")
        sim.conn.execute("_m.positions_get, _m.orders_get = _real_positions, _real_orders")
    return journal


def test_a_multi_symbol_request_reads_the_account_once(port, sim, tmp_path):
    """Before, the request read the whole account twice: once for the daily loss halt, once more for the
    limits' check (every symbol's positions, orders and day's deals each time)."""
    journal = _counted_run(_TwoSymbols, port, sim, tmp_path)
    assert SEEN["one reading"] == len(_TwoSymbols.symbols)  # each symbol's deals of the day, once
    assert SEEN["one request"] == SEEN["one reading"]
    assert SEEN["one book"] >= 2 * len(_TwoSymbols.symbols)  # each symbol's positions and orders
    assert SEEN["one request's book"] == SEEN["one book"], "the requesting symbol's book was read twice"
    sent = [r for r in read_journal(journal) if r["type"] == "result" and r.get("call") == "order"]
    assert [r["symbol"] for r in sent] == ["GBPUSD"] and sent[0]["value"] is not None


class _TwoRequests(_TwoSymbols):
    """At its first bar: one order on each symbol, the reads of each counted."""

    def on_bar(self) -> None:
        if "requests" in SEEN:
            return
        reads, book = SEEN["count"], SEEN["book"]
        counted = []
        for symbol in self.symbols:
            before, books = reads(), book()
            self.buy(0.1, symbol=symbol, comment=f"counted {symbol}")
            counted.append((reads() - before, book() - books))
        SEEN["requests"] = counted
        before, books = reads(), book()
        SEEN["run"].account_state()
        SEEN["one reading"], SEEN["one book"] = reads() - before, book() - books


def test_each_request_reads_the_account_once_and_no_reading_outlives_its_request(port, sim, tmp_path):
    """Two requests of one bar: each reads the whole account once, a reading of its own (none is kept for
    the next request: the first one's order changed the account)."""
    journal = _counted_run(_TwoRequests, port, sim, tmp_path)
    assert SEEN["one reading"] == len(_TwoSymbols.symbols)
    assert SEEN["requests"] == [(SEEN["one reading"], SEEN["one book"])] * 2
    sent = [r for r in read_journal(journal) if r["type"] == "result" and r.get("call") == "order"]
    assert [r["symbol"] for r in sent] == ["EURUSD", "GBPUSD"] and all(r["value"] is not None for r in sent)
