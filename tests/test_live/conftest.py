"""Fixtures for the live-trading tests: the simulated terminal behind a real RPyC server, on a clock the
test moves (``market.set_now``/``advance``), and a runner whose sleep advances that clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_datafeeds.conftest import mt5_server, native_mt5, sim_market  # noqa: F401 - the same fixtures

START = "2024-03-07 10:00"  # broker time (a Thursday): H1 bars then run across the US DST change of 03-10
HOUR = 3600


class Sim:
    """The server's simulator over a control connection: ``sim`` (switches) and ``market`` (the clock)."""

    def __init__(self, conn):
        self.conn = conn
        self.state = conn.modules.MetaTrader5.SIM
        self.market = conn.modules["MetaTrader5.market"]

    def sleep(self, seconds: float) -> None:
        """The runner's sleep: one H1 bar of simulated time per call, whatever it asks."""
        self.market.advance(HOUR)

    def fail(self, name: str, nth: int = 1) -> None:
        """The ``nth`` call of ``name`` from now drops the link (ConnectionResetError on the server)."""
        self.state.configure(fail=((name, nth, 0),))


@pytest.fixture
def sim(mt5_server):  # noqa: F811 - the imported fixture
    import rpyc

    conn = rpyc.classic.connect(*mt5_server)
    s = Sim(conn)
    s.state.reset()
    s.market.set_now(START)
    try:
        yield s
    finally:
        s.market.set_now(None)
        s.state.reset()
        conn.close()


@pytest.fixture
def bad_quotes(sim):
    """``bad_quotes(*quotes)``: the terminal's next quotes (``live_support.plan_quotes``), cleared after."""
    from test_live.live_support import plan_quotes

    yield lambda *quotes: plan_quotes(sim, *quotes)
    plan_quotes(sim)


@pytest.fixture(autouse=True)
def _close_sources():
    from test_live.live_support import OPEN_SOURCES

    yield
    while OPEN_SOURCES:
        OPEN_SOURCES.pop().close()


@pytest.fixture
def port(mt5_server) -> int:  # noqa: F811
    return mt5_server[1]


def journal_path(tmp_path: Path, name: str = "run.jsonl") -> Path:
    return tmp_path / name
