"""``TerminalTrade`` against the simulated terminal, both ways a terminal is reached: in-process as the
``MetaTrader5`` module (the Windows path) and behind a real RPyC classic server (the Linux bridge).

Each test runs on both (``terminal`` fixture); ``sim`` is the simulator's state (``SIM``) in the process
that runs it, so a test switches the trade server's misbehaviour the same way on both paths.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalError, UnknownSymbolError
from neuronet.live import retcodes
from neuronet.live.limits import Limits
from neuronet.live.terminal_requests import TradeSetupError
from neuronet.live.terminal_trade import TerminalTrade

MT5SIM_DIR = Path(__file__).resolve().parents[1] / "mt5sim"
MAGIC = 4242
FOK, IOC, RETURN = 0, 1, 2


@pytest.fixture(scope="module")
def sim_server():
    """``(host, port)`` of an RPyC classic server subprocess whose ``MetaTrader5`` is the simulator."""
    proc = subprocess.Popen(
        [sys.executable, str(MT5SIM_DIR / "serve.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=30):
            raise RuntimeError("the simulated terminal server did not start within 30 s")
        word, port = proc.stdout.readline().split()
        assert word == "LISTENING"
        yield "127.0.0.1", int(port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _forget_sim() -> None:
    for name in [m for m in sys.modules if m == "MetaTrader5" or m.startswith("MetaTrader5.")]:
        del sys.modules[name]


class Terminal:
    """One way to the simulated terminal: ``sim`` (its ``SIM``), ``source()`` (a reconnecting link) and
    ``trade(**kw)`` (a ``TerminalTrade`` on EURUSD whose records land in ``records``)."""

    def __init__(self, kind: str, sim, host: str | None = None, port: int = 0) -> None:
        self.kind, self.sim, self.host, self.port = kind, sim, host, port
        self.records: list[dict] = []
        self.sources: list[TerminalSource] = []

    def source(self, **kw) -> TerminalSource:
        kw.setdefault("backoff", 0.01)
        host = () if self.kind == "native" else (self.host, self.port)
        self.sources.append(TerminalSource(*host, timeout=10, **kw))
        return self.sources[-1]

    def close(self) -> None:
        for source in self.sources:
            source.close()

    def trade(self, **kw) -> TerminalTrade:
        kw.setdefault("magic", MAGIC)
        kw.setdefault("record", self.records.append)
        kw.setdefault("lost_reply_wait", 0.01)
        kw.setdefault("backoff", 0.01)
        return TerminalTrade(self.source(), kw.pop("symbol", "EURUSD"), **kw)

    def calls(self, name: str) -> int:
        return self.sim.call_count(name)


@pytest.fixture(params=["native", "bridge"])
def terminal(request, monkeypatch):
    if request.param == "native":
        monkeypatch.syspath_prepend(str(MT5SIM_DIR))
        _forget_sim()
        import MetaTrader5

        MetaTrader5.SIM.reset()
        native = Terminal("native", MetaTrader5.SIM)
        yield native
        native.close()
        MetaTrader5.SIM.reset()
        _forget_sim()
        return
    import rpyc

    host, port = request.getfixturevalue("sim_server")
    control = rpyc.classic.connect(host, port)
    sim = control.modules.MetaTrader5.SIM
    sim.reset()
    bridge = Terminal("bridge", sim, host, port)
    try:
        yield bridge
    finally:
        bridge.close()
        sim.reset()
        control.close()


def tick(terminal):
    return terminal.sim.book.quote("EURUSD")  # (broker seconds, bid, ask)


# -- fills -------------------------------------------------------------------------------------------------
def test_market_orders_fill_with_the_filling_mode_the_symbol_allows(terminal):
    terminal.sim.book.configure(filling_mode=2)  # IOC only: a FOK request would be refused with 10030
    trade = terminal.trade()
    _, bid, ask = tick(terminal)
    ticket = trade.order(+1, 0.1, bid - 0.002, None, MAGIC, "first")
    assert ticket is not None and trade.last_retcode == retcodes.DONE
    (pos,) = trade.positions()
    assert (pos.ticket, pos.side, pos.lots, pos.price_open, pos.sl, pos.comment) == (
        ticket,
        1,
        0.1,
        ask,
        bid - 0.002,
        "first",
    )
    sent = [r["request"] for r in terminal.records if r["event"] == "request"]
    assert sent[0]["type_filling"] == IOC and sent[0]["comment"].endswith(" first")
    assert trade.order(-1, 0.2, None, None, MAGIC, "") is not None
    assert sorted(p.side for p in trade.positions()) == [-1, 1]  # a hedging account: two positions


def test_the_unsupported_filling_mode_is_what_a_careless_request_gets(terminal):
    """The simulated server refuses a filling mode the symbol does not allow (what users meet with
    hand-made requests); ``TerminalTrade`` reads the mask and never sends one."""
    terminal.sim.book.configure(filling_mode=1)  # FOK only
    trade = terminal.trade()
    request = {"action": 1, "symbol": "EURUSD", "volume": 0.1, "type": 0, "type_filling": IOC}
    answer, _ = trade.link.call("order_send", request)
    assert answer.retcode == 10030
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is not None and trade.last_retcode == 10009


@pytest.mark.parametrize("lots", [0.001, 0.015, 0.123, 1e9, -0.1, 0.0, float("inf")])
def test_live_volumes_are_refused_never_rounded_or_clamped(terminal, lots):
    """0.001 lots once went out as 0.01 (ten times the risk), 0.015 as 0.02, 1e9 as the maximum: refused
    with 10014 as the paper account and the backtest refuse them, before the terminal sees anything."""
    trade = terminal.trade()
    ticket = trade.order(+1, 0.1, None, None, MAGIC, "")
    _, _, ask = tick(terminal)
    checks_before, sends_before = terminal.calls("order_check"), terminal.calls("order_send")
    assert trade.order(+1, lots, None, None, MAGIC, "") is None and trade.last_retcode == 10014
    assert trade.pending("buy_limit", lots, ask - 0.002, None, None, None, None, MAGIC, "") is None
    assert trade.last_retcode == 10014
    assert trade.close(ticket, None, lots) == 0 and trade.last_retcode == 10014
    assert (terminal.calls("order_check"), terminal.calls("order_send")) == (checks_before, sends_before)
    assert [(p.ticket, p.lots) for p in trade.positions()] == [(ticket, 0.1)] and trade.orders() == []
    assert [r["retcode"] for r in terminal.records if r["event"] == "refused"] == [10014] * 3


def test_a_volume_on_the_step_goes_out_as_that_step(terminal):
    import numpy as np

    trade = terminal.trade()
    ticket = trade.order(+1, float(np.float32(0.1)), None, None, MAGIC, "")  # 0.10000000149...
    assert ticket is not None and trade.positions()[0].lots == 0.1
    sent = [r["request"]["volume"] for r in terminal.records if r["event"] == "request"]
    assert sent == [0.1]


def test_partial_close_close_and_modify(terminal):
    trade = terminal.trade()
    ticket = trade.order(+1, 0.3, None, None, MAGIC, "")
    _, bid, _ = tick(terminal)
    assert trade.modify(ticket, bid - 0.003, bid + 0.004)
    assert (trade.positions()[0].sl, trade.positions()[0].tp) == (bid - 0.003, bid + 0.004)
    assert not trade.modify(ticket, None, None) and trade.last_retcode == 10025  # no changes
    assert trade.modify(ticket, 0, None) and trade.positions()[0].sl is None  # 0 removes a stop
    assert trade.close(ticket, None, 0.1) == 1
    assert trade.positions()[0].lots == 0.2
    assert trade.close(ticket, None, 0.5) == 0 and trade.last_retcode == 10038  # more than it holds
    assert trade.close(None, MAGIC) == 1 and trade.positions() == []
    assert trade.close(ticket, None) == 0 and trade.last_retcode == 10036
    deals = [d for d in terminal.sim.book.deals if d.position_id == ticket]
    assert [round(d.volume, 2) for d in deals] == [0.3, 0.1, 0.2]
    assert trade.account().balance == pytest.approx(10_000 + sum(d.profit for d in deals))


def test_close_by_closes_two_opposite_positions(terminal):
    trade = terminal.trade()
    long_ = trade.order(+1, 0.3, None, None, MAGIC, "")
    short = trade.order(-1, 0.1, None, None, MAGIC, "")
    assert trade.close_by(long_, short)
    (left,) = trade.positions()
    assert (left.ticket, left.lots) == (long_, 0.2)
    assert not trade.close_by(long_, long_) and trade.last_retcode == 10013


def test_pending_orders_place_modify_fill_and_cancel(terminal):
    trade = terminal.trade()
    _, bid, ask = tick(terminal)
    limit = trade.pending("buy_limit", 0.1, ask - 0.002, None, bid - 0.004, None, None, MAGIC, "lim")
    stop = trade.pending("sell_stop", 0.1, bid - 0.003, None, None, None, "today", MAGIC, "")
    assert limit and stop and trade.last_retcode == retcodes.PLACED
    kinds = {o.ticket: o.kind for o in trade.orders()}
    assert kinds == {limit: "buy_limit", stop: "sell_stop"}
    assert trade.modify_order(limit, ask - 0.0025, None, None, None)
    assert next(o for o in trade.orders() if o.ticket == limit).price == pytest.approx(ask - 0.0025)
    assert trade.cancel(stop) and [o.ticket for o in trade.orders()] == [limit]
    terminal.sim.book.move("EURUSD", -300)  # the ask falls through the limit: it fills
    assert trade.orders() == []
    (pos,) = trade.positions()
    assert (pos.ticket, pos.price_open, pos.comment) == (limit, pytest.approx(ask - 0.0025), "lim")
    assert not trade.cancel(limit) and trade.last_retcode == 10013


def test_a_stop_limit_order_becomes_a_limit_when_reached(terminal):
    trade = terminal.trade()
    _, _, ask = tick(terminal)
    ticket = trade.pending("buy_stop_limit", 0.1, ask + 0.002, ask + 0.001, None, None, None, MAGIC, "")
    assert ticket and trade.orders()[0].stoplimit == pytest.approx(ask + 0.001)
    terminal.sim.book.move("EURUSD", 250)
    (order,) = trade.orders()
    assert (order.kind, order.price, order.stoplimit) == ("buy_limit", pytest.approx(ask + 0.001), None)


def test_an_expiration_crosses_in_broker_time_and_comes_back_in_utc(terminal):
    terminal.sim.configure(trade={"stops_level": 0})  # the switches also come through SIM.configure
    trade = terminal.trade()
    _, _, ask = tick(terminal)
    when = pd.Timestamp("2024-01-05 20:00", tz="UTC")  # the simulated now is 13:37 UTC, broker UTC+2
    ticket = trade.pending("buy_limit", 0.1, ask - 0.002, None, None, None, when, MAGIC, "")
    assert trade.orders()[0].expiration == when
    assert terminal.sim.book.orders[ticket]["expiration"] == (when + pd.Timedelta(hours=2)).value // 10**9


# -- rejections --------------------------------------------------------------------------------------------
def test_a_volume_or_a_stop_too_large_for_a_float_is_refused_live_not_a_crash(terminal):
    """An integer no float holds (10**400: an EA's arithmetic gone wrong) as a volume is refused with
    10014 and as a stop with 10016, as the backtest refuses them, before the terminal sees anything."""
    trade = terminal.trade()
    _, _, ask = tick(terminal)
    checks_before = terminal.calls("order_check")
    assert trade.order(+1, 10**400, None, None, MAGIC, "") is None and trade.last_retcode == 10014
    assert trade.order(+1, 0.1, 10**400, None, MAGIC, "") is None and trade.last_retcode == 10016
    assert trade.pending("buy_limit", 0.1, ask - 0.002, None, None, -(10**400), None, MAGIC, "") is None
    assert trade.last_retcode == 10016
    assert terminal.calls("order_check") == checks_before and trade.positions() == []


def test_rejections_are_recorded_never_raised(terminal):
    trade = terminal.trade()
    _, bid, ask = tick(terminal)
    checks_before = terminal.calls("order_check")
    assert trade.order(+1, float("nan"), None, None, MAGIC, "") is None and trade.last_retcode == 10014
    assert trade.order(+1, 0.1, bid + 0.001, None, MAGIC, "") is None and trade.last_retcode == 10016
    assert trade.pending("buy_limit", 0.1, ask + 0.001, None, None, None, None, MAGIC, "") is None
    assert trade.last_retcode == 10015
    assert trade.pending("buy_limit", 0.1, ask - 0.001, None, None, None, "2020-01-01", MAGIC, "") is None
    assert trade.last_retcode == 10022
    assert terminal.calls("order_check") == checks_before  # refused here, nothing reached the terminal
    assert trade.order(+1, 100, None, None, MAGIC, "") is None  # the symbol's maximum: no money for that
    assert trade.last_retcode == 10019
    terminal.sim.book.configure(market_closed=True)
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10018
    assert terminal.calls("order_send") == 0 and trade.positions() == []
    refused = [r for r in terminal.records if r["event"] in ("refused", "result")]
    assert [r["retcode"] for r in refused] == [10014, 10016, 10015, 10022, 10019, 10018]
    assert all(r["message"].startswith(str(r["retcode"])) for r in refused)
    json.dumps(terminal.records, allow_nan=False)  # JSON-ready, NaN volume included


def test_stops_respect_the_symbols_stops_level(terminal):
    terminal.sim.book.configure(stops_level=50)
    trade = terminal.trade()
    _, bid, _ = tick(terminal)
    assert trade.order(+1, 0.1, bid - 0.0003, None, MAGIC, "") is None and trade.last_retcode == 10016
    assert "by at least 0.0005" in terminal.records[-1]["reason"]
    assert trade.order(+1, 0.1, bid - 0.0006, None, MAGIC, "") is not None


# -- requotes and lost replies ---------------------------------------------------------------------------
def test_a_requote_within_the_deviation_is_sent_again_at_the_new_price(terminal):
    terminal.sim.book.configure(requotes=2, requote_points=4)
    trade = terminal.trade(deviation=10)
    _, _, ask = tick(terminal)
    ticket = trade.order(+1, 0.1, None, None, MAGIC, "")
    assert ticket is not None and trade.last_retcode == 10009
    assert trade.positions()[0].price_open == pytest.approx(ask + 0.00008)
    assert terminal.calls("order_send") == 3
    assert [r["points"] for r in terminal.records if r["event"] == "requote"] == pytest.approx([4, 8])


def test_a_requote_beyond_the_deviation_is_refused(terminal):
    terminal.sim.book.configure(requotes=1, requote_points=15)
    trade = terminal.trade(deviation=10)
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10004
    assert terminal.calls("order_send") == 1 and trade.positions() == []
    assert "beyond the deviation of 10 points" in terminal.records[-1]["reason"]


def test_price_changed_is_retried_like_a_requote(terminal):
    terminal.sim.book.configure(price_changes=1, requote_points=-3)
    trade = terminal.trade()
    assert trade.order(-1, 0.1, None, None, MAGIC, "") is not None
    assert terminal.calls("order_send") == 2


@pytest.mark.parametrize("code", [0, -10005], ids=["link-drops", "ipc-timeout"])
def test_a_lost_reply_is_found_by_its_id_and_not_sent_again(terminal, code):
    terminal.sim.book.configure(lost_replies=(code,))
    trade = terminal.trade()
    ticket = trade.order(+1, 0.1, None, None, MAGIC, "once")
    assert ticket is not None and trade.last_retcode == 10009
    assert terminal.sim.book.executed == 1 and terminal.calls("order_send") == 1
    (pos,) = trade.positions()
    assert pos.ticket == ticket and pos.comment == "once"
    assert [r["event"] for r in terminal.records] == ["request", "recovered", "result"]


def test_a_lost_reply_on_a_pending_order_and_a_close(terminal):
    trade = terminal.trade()
    _, _, ask = tick(terminal)
    ticket = trade.order(+1, 0.2, None, None, MAGIC, "")
    terminal.sim.book.configure(lost_replies=(0, 0))
    assert trade.pending("buy_limit", 0.1, ask - 0.002, None, None, None, None, MAGIC, "") is not None
    assert trade.close(ticket, None, 0.1) == 1
    assert len(trade.orders()) == 1 and trade.positions()[0].lots == 0.1
    assert terminal.calls("order_send") == 3


def test_a_request_lost_before_the_server_is_not_sent_again_and_settles_as_not_executed(terminal):
    """The link drops during ``order_send`` before the request executed: from here that cannot be told
    from a reply lost after it executed, so it is not sent again; the terminal shows nothing of it for
    ``lost_reply_settle`` seconds, and only then is it taken as not executed."""
    now = [0.0]
    terminal.sim.configure(fail=(("order_send", 1, 0),))
    trade = terminal.trade(lost_reply_settle=60.0, monotonic=lambda: now[0])
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10012
    assert terminal.calls("order_send") == 1 and terminal.sim.book.executed == 0
    (tag,) = trade.unresolved
    assert trade.possibly_open() == 1
    now[0] = 59.0
    assert trade.resolve() == {} and tag in trade.unresolved  # not yet: it may still be executing
    now[0] = 60.0
    assert trade.resolve() == {tag: None} and trade.unresolved == {}
    assert [r["event"] for r in terminal.records][-3:] == ["unresolved", "result", "not executed"]
    assert terminal.calls("order_send") == 1 and trade.positions() == []


def test_a_lost_reply_that_cannot_be_looked_up_is_not_sent_again(terminal):
    trade = terminal.trade(retries=0)
    trade.spec()
    terminal.sim.book.configure(lost_replies=(-10005,))
    terminal.sim.configure(fail=(("history_deals_get", 1, -10004),))  # the look-up's first read
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10012
    assert terminal.calls("order_send") == 1 and terminal.sim.book.executed == 1
    (tag,) = trade.unresolved
    assert tag in terminal.records[-1]["reason"] and "not sent again" in terminal.records[-1]["reason"]
    assert terminal.records[-2]["event"] == "unresolved" and terminal.records[-2]["request"]["volume"] == 0.1


# -- limits, checked before order_send ----------------------------------------------------------------------
def limits(**kw) -> Limits:
    base = {"max_lots": 0.5, "max_positions": 2, "max_daily_loss": 100.0, "symbols": ("EURUSD",)}
    return Limits(**{**base, **kw})


def test_every_limit_is_checked_before_the_terminal_sees_the_request(terminal, tmp_path):
    stop = tmp_path / "STOP"
    trade = terminal.trade(limits=limits(kill_switch=stop))
    _, _, ask = tick(terminal)
    assert trade.order(+1, 0.6, None, None, MAGIC, "") is None and trade.last_retcode == 10027
    assert trade.order(+1, 0.5, None, None, MAGIC, "") is not None
    assert trade.pending("buy_limit", 0.1, ask - 0.002, None, None, None, None, MAGIC, "") is not None
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None
    assert "2 open positions" in trade_reason(terminal)
    stop.touch()
    (order,) = trade.orders()
    assert trade.cancel(order.ticket)  # deleting and closing stay allowed with the kill switch
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and "kill-switch" in trade_reason(terminal)
    assert trade.close(None, MAGIC) == 1
    sends = terminal.calls("order_send")
    assert sends == 4  # the order, the pending order, the cancel, the close: nothing refused was sent
    other = terminal.trade(symbol="GBPUSD", limits=limits())
    assert other.order(+1, 0.1, None, None, MAGIC, "") is None and "allowed symbols" in trade_reason(terminal)


def trade_reason(terminal) -> str:
    return terminal.records[-1]["reason"]


def test_the_daily_loss_stops_trading_for_the_rest_of_the_day(terminal):
    trade = terminal.trade(limits=limits(max_daily_loss=50.0))
    ticket = trade.order(+1, 0.5, None, None, MAGIC, "")
    terminal.sim.book.move("EURUSD", -150)  # 0.5 lots * 150 points = 75 USD floating loss
    assert trade.order(-1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10027
    assert "daily loss limit 50" in trade_reason(terminal)
    terminal.sim.book.move("EURUSD", +150)  # the loss is gone, but the day is over for this EA
    assert trade.order(-1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10027
    assert trade.close(ticket, None) == 1  # getting flat is still allowed
    assert [r["event"] for r in terminal.records].count("halted") == 1


# -- positions by magic; the records ------------------------------------------------------------------------
def test_positions_are_this_eas_and_a_restart_adopts_them(terminal):
    first = terminal.trade()
    mine = first.order(+1, 0.1, None, None, MAGIC, "")
    stranger = terminal.trade(magic=99)
    theirs = stranger.order(+1, 0.1, None, None, 99, "")
    restarted = terminal.trade()
    assert [p.ticket for p in restarted.positions()] == [mine]
    assert restarted.close(None, None) == 1
    assert [p.ticket for p in stranger.positions()] == [theirs]


def test_the_windows_path_uses_the_module_in_process(terminal):
    trade = terminal.trade()
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is not None
    assert trade.link.where == ("local" if terminal.kind == "native" else f"{terminal.host}:{terminal.port}")


def test_retcode_messages_are_one_line():
    assert retcodes.message(10016) == "10016 invalid stops in the request"
    assert retcodes.message(12345) == "12345 unknown trade server return code"
    assert all("\n" not in text for text in retcodes.MESSAGES.values())


def test_a_failed_read_raises_instead_of_looking_flat(terminal):
    trade = terminal.trade(retries=0)
    trade.order(+1, 0.1, None, None, MAGIC, "")
    terminal.sim.configure(fail=(("positions_get", 1, -1),))  # "call failed": not "no positions"
    with pytest.raises(TerminalError, match="positions_get"):
        trade.positions()
    assert len(trade.positions()) == 1


def test_setup_errors_name_the_setting(terminal):
    with pytest.raises(TradeSetupError, match="magic"):
        terminal.trade(magic=-1)
    with pytest.raises(TradeSetupError, match="deviation"):
        terminal.trade(deviation=1.5)
    with pytest.raises(UnknownSymbolError, match="'EURUSX'"):
        terminal.trade(symbol="EURUSX").order(+1, 0.1, None, None, MAGIC, "")


def test_on_a_netting_account_orders_change_the_one_position(terminal):
    terminal.sim.book.configure(hedging=False)
    trade = terminal.trade()
    first = trade.order(+1, 0.2, None, None, MAGIC, "")
    assert trade.order(+1, 0.1, None, None, MAGIC, "") == first  # the position it added to
    assert trade.order(-1, 0.5, None, None, MAGIC, "") == first  # reversed: the same position
    (pos,) = trade.positions()
    assert (pos.ticket, pos.side, pos.lots) == (first, -1, 0.2)
    assert not trade.close_by(first, first) and "hedging account" in trade_reason(terminal)
    assert trade.close(None, MAGIC) == 1 and trade.positions() == []


def test_a_request_crosses_the_bridge_as_a_real_dict(terminal):
    """The official package's ``order_send`` takes a real dict only: an RPyC proxy of one would be refused
    (the simulator refuses it the same way)."""
    trade = terminal.trade()
    request = {"action": 1, "symbol": "EURUSD", "volume": 0.1, "type": 0, "type_filling": FOK, "magic": 1}
    answer, error = trade.link.call("order_check", request)
    assert error is None and answer.retcode == 0 and answer.request.volume == 0.1


def test_a_lost_reply_is_found_on_a_server_that_drops_comments(terminal):
    terminal.sim.book.configure(keep_comments=False)
    trade = terminal.trade()
    ticket = trade.order(+1, 0.1, None, None, MAGIC, "")
    terminal.sim.book.configure(lost_replies=(0, 0))
    assert trade.order(+1, 0.2, None, None, MAGIC, "") is not None  # a different volume: not the first
    assert trade.close(ticket, None, 0.1) == 1
    assert terminal.sim.book.executed == 3 and terminal.calls("order_send") == 3
    assert sorted(p.lots for p in trade.positions()) == [0.2]


def test_a_lost_request_is_resolved_once_the_terminal_answers_again(terminal):
    trade = terminal.trade(retries=0)
    trade.spec()
    terminal.sim.book.configure(lost_replies=(-10005,))
    terminal.sim.configure(fail=(("history_deals_get", 1, -10004),))
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10012
    (tag,) = trade.unresolved
    found = trade.resolve()
    assert found[tag].ok and found[tag].position == trade.positions()[0].ticket and trade.unresolved == {}
    assert terminal.records[-1]["event"] == "recovered"


TRADING = (
    "order",
    "pending",
    "close",
    "close_by",
    "modify",
    "orders",
    "cancel",
    "modify_order",
    "positions",
    "account",
    "price",
)


def test_the_trading_half_of_the_trade_context_has_the_protocols_signatures():
    import inspect

    from strategies.trade import TradeContext

    for name in TRADING:
        want = list(inspect.signature(getattr(TradeContext, name)).parameters)
        got = list(inspect.signature(getattr(TerminalTrade, name)).parameters)
        assert got == want, name


def test_an_expert_advisor_trades_through_it_unchanged(terminal):
    """The EA-facing methods (``buy(sl_points=...)``, ``position``, ``close``) on a context made of the
    terminal trade plus the parts a runner supplies (here only ``time_now``)."""
    from strategies.base import ExpertAdvisor

    class Context:
        def __init__(self, trade):
            self.trade = trade

        def __getattr__(self, name):
            return getattr(self.trade, name)

        def time_now(self):
            return pd.Timestamp("2024-01-05 13:00", tz="UTC")

    ea = ExpertAdvisor()
    ea.magic = MAGIC
    ea.attach(Context(terminal.trade()), bars=None)
    _, bid, ask = tick(terminal)
    ticket = ea.buy(0.1, sl_points=100, comment="ea")
    assert ticket is not None and ea.last_retcode == 10009 and ea.position == pytest.approx(0.1)
    assert ea.positions()[0].sl == pytest.approx(ask - 0.001)
    assert ea.bid == bid and ea.ask == ask and ea.point == 1e-5
    assert ea.close() == 1 and ea.position == 0


def test_on_a_netting_account_an_order_that_only_reduces_passes_the_limits(terminal, tmp_path):
    terminal.sim.book.configure(hedging=False)
    stop = tmp_path / "STOP"
    trade = terminal.trade(limits=limits(max_positions=1, kill_switch=stop))
    assert trade.order(+1, 0.3, None, None, MAGIC, "") is not None
    stop.touch()
    assert trade.order(-1, 0.1, None, None, MAGIC, "") is not None  # takes risk off
    assert trade.order(-1, 0.5, None, None, MAGIC, "") is None  # would reverse: a new position
    assert "kill-switch" in trade_reason(terminal)
    assert trade.positions()[0].lots == pytest.approx(0.2)


def test_a_market_without_quotes_is_refused_before_the_terminal(terminal):
    trade = terminal.trade()
    terminal.sim.book.move("EURUSD", -(10**6))  # a bid of zero or below: no quote to trade at
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10021
    assert trade.pending("sell_stop", 0.1, 0.5, None, None, None, None, MAGIC, "") is None
    assert trade.last_retcode == 10021 and terminal.calls("order_check") == 0


@pytest.mark.parametrize("terminal", ["native"], indirect=True)  # quotes planned on the in-process module
def test_a_lost_reply_is_looked_up_at_the_time_it_was_sent_whatever_the_quote_says_then(terminal):
    import MetaTrader5

    trade = terminal.trade(retries=0)
    trade.spec()
    terminal.sim.book.configure(lost_replies=(-10005,))
    MetaTrader5.BAD_QUOTES[:] = [{}, {"bid": float("nan")}, {"time": 1}]  # the order's quote, then garbage
    try:
        ticket = trade.order(+1, 0.1, None, None, MAGIC, "")
    finally:
        MetaTrader5.BAD_QUOTES.clear()
    assert ticket is not None and trade.last_retcode == 10009 and trade.unresolved == {}
    assert terminal.calls("order_send") == 1 and terminal.sim.book.executed == 1
    assert [r["event"] for r in terminal.records] == ["request", "recovered", "result"]


@pytest.mark.parametrize("terminal", ["native"], indirect=True)
def test_a_request_at_a_garbage_quote_is_refused_with_no_quotes(terminal):
    import MetaTrader5

    trade = terminal.trade()
    ticket = trade.order(+1, 0.1, None, None, MAGIC, "")
    for bad in (None, {"ask": 0.5}, {"time": float("nan")}):
        MetaTrader5.BAD_QUOTES[:] = [bad] * 3
        try:
            assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10021
            assert trade.close(ticket, None) == 0 and trade.last_retcode == 10021
        finally:
            MetaTrader5.BAD_QUOTES.clear()
    assert terminal.calls("order_send") == 1 and len(trade.positions()) == 1
    assert {r["action"] for r in terminal.records if r["event"] == "refused"} == {"deal", "close"}


# -- a terminal that answers after the timeout --------------------------------------------------------------
def _wait_for(condition, seconds: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the simulated terminal did not get there in time"
        time.sleep(0.05)


@pytest.mark.parametrize("terminal", ["bridge"], indirect=True)
def test_an_order_answered_after_the_timeout_is_never_sent_twice(terminal):
    """One ``buy(0.1)`` became two positions: the terminal answered ``order_send`` after the bridge's
    timeout, both looks came before it had filled, and the request went out again. Now it stays
    unresolved (10012), counts against ``max_positions`` as open, and is found once the terminal fills it."""
    terminal.sim.configure(delay=(("order_send", 1.5),))  # fills 1.5 s after it was asked
    source = TerminalSource(terminal.host, terminal.port, timeout=0.5, backoff=0.01)
    terminal.sources.append(source)
    trade = TerminalTrade(
        source,
        "EURUSD",
        magic=MAGIC,
        limits=limits(max_positions=1),
        record=terminal.records.append,
        lost_reply_wait=0.2,
        backoff=0.01,
    )
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10012
    (tag,) = trade.unresolved
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10027
    assert "1 request(s) whose reply was lost" in trade_reason(terminal)
    _wait_for(lambda: terminal.sim.book.executed == 1)  # the first request, filled late
    terminal.sim.configure(delay=(("order_send", 0.0),))
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10027
    assert "1 open positions" in trade_reason(terminal) and "lost" not in trade_reason(terminal)
    assert trade.unresolved == {} and [p.lots for p in trade.positions()] == [0.1]
    assert terminal.calls("order_send") == 1 and terminal.sim.book.executed == 1
    assert [r["event"] for r in terminal.records if r.get("id") == tag] == [
        "request",
        "unresolved",
        "result",
        "recovered",
    ]


@pytest.mark.parametrize("terminal", ["bridge"], indirect=True)
def test_on_a_netting_account_a_reducing_order_counts_the_unresolved_ones_before_it(terminal, tmp_path):
    """Long 0.1 on a netting account, kill switch on. ``sell(0.1)`` is answered after the timeout (it stays
    unresolved, the position still shows), and the EA sells 0.1 again: that order "only reduces" the
    position as it shows, so it passed the limits, and once both filled the account was short 0.1, a
    position opened with the kill switch on. It reduces only if it does whatever the unresolved did."""
    terminal.sim.book.configure(hedging=False)
    stop = tmp_path / "STOP"
    source = TerminalSource(terminal.host, terminal.port, timeout=0.5, backoff=0.01)
    terminal.sources.append(source)
    trade = TerminalTrade(
        source, "EURUSD", magic=MAGIC, limits=limits(kill_switch=stop), record=terminal.records.append,
        lost_reply_wait=0.2, backoff=0.01,
    )  # fmt: skip
    assert trade.order(+1, 0.1, None, None, MAGIC, "") is not None
    stop.touch()
    terminal.sim.configure(delay=(("order_send", 1.5),))
    assert trade.order(-1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10012
    terminal.sim.configure(delay=(("order_send", 0.0),))
    assert trade.order(-1, 0.1, None, None, MAGIC, "") is None and trade.last_retcode == 10027
    assert "kill-switch" in trade_reason(terminal)
    _wait_for(lambda: terminal.sim.book.executed == 2)  # the first sell, filled late
    assert trade.positions() == []  # flat, as the EA asked: never short
    assert terminal.calls("order_send") == 2
