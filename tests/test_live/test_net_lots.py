"""A symbol's net volume (``position``, ``position_of``: the contexts' ``net_lots``) answered the same by
every context on the same state: the backtest's trading context (from its books' kept sums), a terminal's
trading on one symbol and the router over several (from the terminal's positions), each equal to the sum
over its own position records, and all of them equal to each other, after every change of the positions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_live.test_terminal_trade import MAGIC, sim_server, terminal  # noqa: F401 - fixtures

from backtests import AccountConfig
from backtests.broker.portfolio import open_brokers
from backtests.context import TradingContext
from datafeeds.clock import UTC
from datafeeds.symbols import BUILTIN
from neuronet.live.context import LiveContext
from neuronet.live.multi_context import TerminalRouter
from strategies.base import ExpertAdvisor
from strategies.errors import EAError
from strategies.trade import net_volume

SYMBOLS = ("EURUSD", "GBPUSD")


def _backtest() -> TradingContext:
    """A hedging account's trading context over EURUSD and GBPUSD at their first bar."""
    time = pd.date_range("2024-01-02", periods=3, freq="h", tz="UTC")
    columns = {}
    for symbol, price in (("EURUSD", 1.10000), ("GBPUSD", 1.25000)):
        o = np.full(3, price)
        columns[symbol] = (o, o, o, o, np.zeros(3), time)
    account = AccountConfig(deposit=1_000_000.0, spread=0, hedging=True)
    brokers = open_brokers(columns, {s: BUILTIN[s] for s in columns}, account, UTC)
    for broker in brokers.values():
        broker.enter(0)
    return TradingContext(brokers, "EURUSD")


def _ea(ctx) -> ExpertAdvisor:
    class Both(ExpertAdvisor):
        symbols = SYMBOLS

    ea = Both()
    ea.attach(ctx, None)
    return ea


def _answers(ctx) -> dict:
    """Each symbol's net volume and the account's, asked of the context and of an EA on it, each checked
    against the sum over the context's own position records (the same float, not an approximation)."""
    ea = _ea(ctx)
    out = {}
    for symbol in (*SYMBOLS, None):
        net = ctx.net_lots(symbol)
        assert net == net_volume(ctx.positions(symbol)), symbol  # the same float as the records' sum
        assert type(net) is type(net_volume(ctx.positions(symbol)))
        if symbol is not None:
            assert ea.position_of(symbol) == net
        out[symbol] = net
    assert ea.position == out["EURUSD"]  # the main chart's symbol
    return out


def _steps(ctx, close) -> list[dict]:
    """The same requests on any context: three EURUSD deals (long, short, long), a GBPUSD short, the
    middle EURUSD deal closed, then part of the first; the answers after each."""
    seen = [_answers(ctx)]
    first = ctx.order(+1, 0.3, None, None, MAGIC, "", symbol="EURUSD")
    seen.append(_answers(ctx))
    middle = ctx.order(-1, 0.1, None, None, MAGIC, "", symbol="EURUSD")
    seen.append(_answers(ctx))
    assert ctx.order(+1, 0.2, None, None, MAGIC, "", symbol="EURUSD")
    seen.append(_answers(ctx))
    assert ctx.order(-1, 0.5, None, None, MAGIC, "", symbol="GBPUSD")
    seen.append(_answers(ctx))
    assert close(ctx, middle, None) == 1
    seen.append(_answers(ctx))
    assert close(ctx, first, 0.1) == 1
    seen.append(_answers(ctx))
    return seen


# Hand-worked: EURUSD +0.3, then 0.3 - 0.1, + 0.2; GBPUSD -0.5; the middle 0.1 closed; 0.1 of the first.
EXPECTED = [
    {"EURUSD": 0, "GBPUSD": 0, None: 0},
    {"EURUSD": 0.3, "GBPUSD": 0, None: 0.3},
    {"EURUSD": 0.2, "GBPUSD": 0, None: 0.2},
    {"EURUSD": 0.4, "GBPUSD": 0, None: 0.4},
    {"EURUSD": 0.4, "GBPUSD": -0.5, None: -0.1},
    {"EURUSD": 0.5, "GBPUSD": -0.5, None: 0.0},
    {"EURUSD": 0.4, "GBPUSD": -0.5, None: -0.1},
]


def _close_backtest(ctx, ticket, lots):
    return ctx.close(ticket, None, lots)


def _close_terminal(ctx, ticket, lots):
    return ctx.close(ticket, MAGIC, lots)


def test_the_backtest_context_answers_each_change_of_the_positions_from_its_books():
    seen = _steps(_backtest(), _close_backtest)
    assert len(seen) == len(EXPECTED)
    for got, want in zip(seen, EXPECTED, strict=True):
        assert got == {k: pytest.approx(v, abs=1e-12) for k, v in want.items()}
    assert seen[0] == {"EURUSD": 0, "GBPUSD": 0, None: 0}  # flat is 0, as the sum of no positions


def test_a_terminal_router_answers_what_the_backtest_context_answers_on_the_same_requests(terminal):  # noqa: F811
    router = TerminalRouter({s: terminal.trade(symbol=s) for s in SYMBOLS}, "EURUSD")
    live = _steps(router, _close_terminal)
    backtest = _steps(_backtest(), _close_backtest)
    for got, want in zip(live, backtest, strict=True):
        assert got == {k: pytest.approx(v, abs=1e-12) for k, v in want.items()}
    # Before any partial close both sum the same lots in the same (ticket) order: the very same floats.
    assert live[:6] == backtest[:6]


def test_a_one_symbol_live_context_answers_its_terminal_symbol(terminal):  # noqa: F811
    trade = terminal.trade()
    now = pd.Timestamp("2024-01-05", tz="UTC")
    ctx = LiveContext(trade, None, record=lambda *a, **k: {}, now=lambda: now, bar=lambda: 0)
    assert ctx.net_lots() == trade.net_lots() == 0
    assert ctx.order(+1, 0.3, None, None, MAGIC, "")
    assert ctx.order(-1, 0.1, None, None, MAGIC, "")
    assert ctx.net_lots() == trade.net_lots() == net_volume(trade.positions()) == pytest.approx(0.2)
    ea = ExpertAdvisor()
    ea.attach(ctx, None)
    assert ea.position == ctx.net_lots()


@pytest.mark.parametrize("symbol", ["XAUUSD", "", 5, "eurusd"])
def test_a_symbol_the_run_does_not_trade_is_the_eas_bug(symbol):
    ea = _ea(_backtest())
    with pytest.raises(EAError, match="symbol"):
        ea.position_of(symbol)


class _Churn(ExpertAdvisor):
    """Random deals, partial closes, reversals and stops on three symbols; on every bar, before and after
    its requests, each symbol's net volume is checked against the sum over its position records."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    seed: int = 0

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.checked = 0
        self.held = 0

    def _check(self) -> None:
        for s in self.symbols:
            net = self.position_of(s)
            assert net == net_volume(self.positions(s)), (self.time_current, s)
            self.checked += 1
            self.held += net != 0
        assert self.position == self.position_of("EURUSD")

    def on_bar(self) -> None:
        self._check()
        for s in self.symbols:
            move = self.rng.integers(0, 6)
            lots = float(self.rng.integers(1, 8)) / 10
            if move == 0:
                self.buy(lots, symbol=s, sl_points=150, tp_points=150)
            elif move == 1:
                self.sell(lots, symbol=s, sl_points=150, tp_points=150)
            elif move == 2 and self.positions(s):
                p = self.positions(s)[0]
                self.close(p.ticket, lots=min(p.lots, 0.1))
            elif move == 3:
                self.buy(50.0, symbol=s)  # refused: no margin for it (10019), nothing changes
        self._check()


@pytest.mark.parametrize("hedging", [True, False])
def test_every_bar_of_a_churning_run_answers_the_sum_over_the_records(hedging):
    """Deals, partial closes, netting reversals, refused requests and stops hit inside bars: after each,
    the kept net volume is the records' sum (a kept answer that missed a change of the book would differ)."""
    from backtests import Backtest
    from datafeeds.synthetic import synthetic_candles

    frames = {s: synthetic_candles(s, "H1", 400, seed=i + 1) for i, s in enumerate(_Churn.symbols)}
    account = AccountConfig(deposit=10_000.0, hedging=hedging)
    result = Backtest(frames, _Churn, forward="1/2", account=account).run()
    ea = result.ea_instance
    assert ea.checked == 2 * 200 * 3 and ea.held > 200  # positions were open much of the time
    assert len(result.trades) > 100 and any(r["retcode"] == 10019 for r in result.rejected)
