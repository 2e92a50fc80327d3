"""A live run touches only what is its own. MetaTrader gives every trade placed by hand magic number 0: an
EA trading with magic 0 would take the user's manual positions for its own (count them against its
limits, close them on a reversal or at the stop, book them in its report)."""

from __future__ import annotations

import pytest
from test_live.live_support import OPEN_SOURCES, PARAMS

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import LiveError
from neuronet.live.limits import Limits
from neuronet.live.runner import LiveRunner, LiveSettings
from neuronet.live.terminal_trade import TerminalTrade, TradeSetupError
from strategies.base import ExpertAdvisor
from strategies.sma import SmaCrossEA


class _Idle(ExpertAdvisor):
    """Trades nothing."""

    def on_bar(self) -> None:
        pass


def _manual_buy(sim) -> int:
    """A position the user opened by hand in the terminal (magic 0)."""
    mt5 = sim.conn.modules.MetaTrader5
    tick = mt5.symbol_info_tick("EURUSD")
    request = sim.conn.eval(
        f"dict(action=1, symbol='EURUSD', volume=0.5, type=0, price={float(tick.ask)!r}, magic=0, "
        "comment='by hand', type_filling=0, deviation=10)"
    )
    assert int(mt5.order_send(request).retcode) == 10009
    return len(sim.state.book.positions)


def _live(port, sim, journal, ea, params):
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=5_000.0, symbols=("EURUSD",))

    def factory(src, symbol, magic, record, *, market):
        return TerminalTrade(src, symbol, magic=magic, limits=limits, record=record, market=market)

    settings = LiveSettings(
        "EURUSD", Timeframe.H1, journal, mode="live", history_bars=300, max_bars=3, close_on_exit=True
    )
    LiveRunner(ea, params, source, settings, trading=factory, sleep=sim.sleep, status=lambda _: None).run()


def test_a_live_run_with_magic_0_is_refused_before_it_touches_the_users_manual_positions(port, sim, tmp_path):
    sim.state.initialized = True
    assert _manual_buy(sim) == 1
    journal = tmp_path / "live.jsonl"
    with pytest.raises(LiveError, match=r"magic number 0 .* by hand.*-p magic="):
        _live(port, sim, journal, _Idle, {})
    assert len(sim.state.book.positions) == 1  # --close-on-exit closed the user's position
    assert not journal.exists()  # refused before anything is written: the same command with -p magic= runs
    _live(port, sim, journal, _Idle, {"magic": 77})
    assert len(sim.state.book.positions) == 1


def test_paper_runs_keep_magic_0(port, sim, tmp_path):
    from test_live.live_support import runner

    runner(port, sim, tmp_path / "paper.jsonl", max_bars=2).run()
    assert SmaCrossEA.resolve_params(PARAMS)["magic"] == 0


def test_a_trade_context_or_a_request_with_magic_0_is_refused(port, sim):
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    with pytest.raises(TradeSetupError, match="magic"):
        TerminalTrade(source, "EURUSD", magic=0)
    notes: list[dict] = []
    trade = TerminalTrade(source, "EURUSD", magic=5, record=notes.append)
    assert trade.order(+1, 0.1, None, None, 0, "") is None and trade.last_retcode == 10013
    assert "magic number 0" in notes[-1]["reason"] and sim.state.call_count("order_send") == 0
    assert trade.magics == {5}
