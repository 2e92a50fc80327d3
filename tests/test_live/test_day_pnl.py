"""Today's P&L as the daily loss limit counts it, from the start of the broker's server day, on the simulated
terminal (a real RPyC server): a position carried over midnight counts only what it made or lost since
00:00 server time (valued at the close of the last M1 bar before it: the bid for a buy, the ask for a
sell), one opened
today all of its profit, and a figure the terminal cannot give refuses new risk with one log line.

Expected figures are computed here from the simulator's raw history (before any move) plus the moves the
test makes, in points, independently of the code under test."""

from __future__ import annotations

import logging

import pytest
from test_live.live_support import OPEN_SOURCES
from test_live.multi_eas import EachOnce
from test_live.test_hostile_world import one_symbol_live
from test_live.test_multi_live import live_runner

from datafeeds.terminal import TerminalSource
from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.terminal_trade import TerminalTrade
from strategies.base import ExpertAdvisor

LOTS_UNITS = 100_000  # the simulator's contract size
FRIDAY = "2024-03-08 00:00"  # broker time: the start of the server day the tests count


def _trade(port, symbol: str = "EURUSD", limits: Limits | None = None, record=None) -> TerminalTrade:
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=0.5, backoff=0.01)
    OPEN_SOURCES.append(source)
    return TerminalTrade(
        source, symbol, magic=777, limits=limits, clock=source.clock, backoff=0.01, record=record
    )


def _carried_and_closed_friday(port, sim) -> TerminalTrade:
    """1 lot of EURUSD bought on Thursday at 15:00, +1000 points by 23:30, closed on Friday at 00:30 after
    falling 900 points: the trade context that did it."""
    sim.market.set_now("2024-03-07 15:00")
    trade = _trade(port)
    ticket = trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +1000)
    sim.market.set_now("2024-03-08 00:30")
    sim.state.book.move("EURUSD", -900)
    assert trade.close(ticket, None) == 1
    return trade


def _raw_start(sim, symbol: str, last_bar: str = "2024-03-07 23:59") -> tuple[float, int]:
    """The close and spread of the simulator's own M1 bar ``last_bar`` (before any move): the last price
    before the server day the tests count begins (Friday 00:00)."""
    rates, _ = sim.market.history(symbol, 1)
    stamp = sim.market._seconds(last_bar)
    at = int(sim.conn.modules.numpy.searchsorted(rates["time"], stamp))
    assert int(rates["time"][at]) == stamp
    return float(rates["close"][at]), int(rates["spread"][at])


def _tick(sim, symbol: str) -> tuple[float, float]:
    _, bid, ask = sim.state.book.quote(symbol)
    return float(bid), float(ask)


def test_a_position_opened_today_counts_its_whole_profit(port, sim):
    sim.market.set_now("2024-03-08 00:30")
    trade = _trade(port)
    bid0, ask0 = _tick(sim, "EURUSD")
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.state.book.move("EURUSD", -600)
    expected = round(((bid0 - 0.006) - ask0) * LOTS_UNITS, 2)  # bought at the ask, valued at the bid
    assert trade.day_pnl().value == pytest.approx(expected, abs=0.01)
    assert trade.day_pnl().unknown == ()


def test_a_carried_sell_counts_todays_move_of_the_ask_from_the_days_start(port, sim):
    """Sold 1 lot on Thursday; the price rises 300 points by 23:30 (a loss of yesterday's), falls 500 on
    Friday: today's P&L is the ask's fall since Thursday's last M1 bar (its close plus its spread), not the
    position's profit since it opened, nor the bid's move."""
    sim.market.set_now("2024-03-07 15:00")
    trade = _trade(port)
    assert trade.order(-1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +300)
    sim.market.set_now("2024-03-08 00:30")
    sim.state.book.move("EURUSD", -500)
    day_start, start_spread = _raw_start(sim, "EURUSD")
    ask_start = day_start + 0.003 + start_spread * 1e-5
    _, ask_now = _tick(sim, "EURUSD")
    expected = (ask_start - ask_now) * LOTS_UNITS
    assert trade.day_pnl().value == pytest.approx(expected, abs=0.01)
    since_open = sum(p.profit for p in trade.positions())
    assert abs(since_open - expected) > 100  # the figure really differs from the profit since it opened


def test_a_carried_position_closed_today_counts_only_what_it_lost_today(port, sim):
    """Bought 1 lot on Thursday, +1000 points by 23:30, closed on Friday after falling 900: the closing
    deal's profit (about +100 since it opened) is not today's; today lost the bid's fall since the day's
    start, valued at the deal's price."""
    trade = _carried_and_closed_friday(port, sim)
    (deal,) = [d for d in sim.state.book.deals if d.entry == 1]
    day_start, _ = _raw_start(sim, "EURUSD")
    expected = (float(deal.price) - (day_start + 0.010)) * LOTS_UNITS
    assert trade.day_pnl().value == pytest.approx(expected, abs=0.02)
    assert float(deal.profit) > 0 > expected


def test_volume_added_today_to_a_carried_netting_position_counts_from_its_fill(port, sim):
    """A netting account: 1 lot carried from Thursday, 1 lot more bought on Friday at the ask: the carried
    lot counts from the bid at the day's start, the added one from its fill price."""
    sim.state.configure(trade={"hedging": False})
    sim.market.set_now("2024-03-07 15:00")
    trade = _trade(port)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +1000)
    sim.market.set_now("2024-03-08 00:30")
    _, fill = _tick(sim, "EURUSD")
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.state.book.move("EURUSD", -400)
    bid, _ = _tick(sim, "EURUSD")
    day_start, _ = _raw_start(sim, "EURUSD")
    expected = ((bid - (day_start + 0.010)) + (bid - fill)) * LOTS_UNITS
    assert trade.day_pnl().value == pytest.approx(expected, abs=0.05)


class TryAdd(ExpertAdvisor):
    """Buys one lot while it holds none; holding it, asks 0.01 lots more at every bar (``TRIED`` keeps
    each bar's broker time, read with ``NOW``, and the answer)."""

    magic: int = 5151

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(1.0)
        else:
            TRIED.append((NOW[0](), self.buy(0.01)))


TRIED: list = []
NOW: list = []


def test_a_runner_running_across_midnight_counts_friday_from_the_price_at_midnight(port, sim, tmp_path):
    """One run from Thursday 21:10 to Friday: the lot gains 1000 points at 23:40 Thursday (orders go on),
    then loses 900 at 00:40 Friday. Friday's orders are refused: today's P&L, counted from the
    price (which carries Thursday's gain), is about -900 USD, while the position is still in profit since
    it opened (what the limit counted before)."""
    TRIED.clear()
    NOW[:] = [lambda: int(sim.market.now_broker())]
    sim.market.set_now("2024-03-07 21:10")
    moves = {sim.market._seconds("2024-03-07 23:40"): +1000, sim.market._seconds("2024-03-08 00:40"): -900}

    def sleep(_seconds: float) -> None:
        before = int(sim.market.now_broker())
        for when, points in moves.items():
            if before < when <= before + 3600:
                sim.market.set_now(when)
                sim.state.book.move("EURUSD", points)
        sim.market.set_now(before + 3600)

    limits = Limits(max_lots=1.0, max_positions=9, max_daily_loss=500.0, symbols=("EURUSD",))
    journal = tmp_path / "live.jsonl"
    one_symbol_live(port, sim, journal, ea=TryAdd, bars=5, limits=limits, sleep=sleep).run()
    friday = sim.market._seconds(FRIDAY)
    thursday = [ok for when, ok in TRIED if when < friday]
    after = [ok for when, ok in TRIED if when >= friday + 2400]  # after Friday's fall
    assert thursday and all(thursday), TRIED
    assert after and not any(after), TRIED
    notes = [r["terminal"] for r in read_journal(journal) if r.get("source") == "terminal"]
    (halt,) = [n for n in notes if n["event"] == "halted"]
    held = sim.conn.modules["MetaTrader5.trading"].positions(sim.state.book, symbol="EURUSD")
    lots = sum(float(p.volume) for p in held)
    assert -1300 * lots < halt["day_pnl"] <= -500.0  # -900 points a lot, give or take an hour's walk
    assert sum(float(p.profit) for p in held) > 0  # still a gain since it opened


def test_a_carried_gain_on_one_symbol_does_not_hide_anothers_loss_across_the_account(port, sim, tmp_path):
    """EURUSD, GBPUSD and USDJPY bought on Thursday (0.1 lots each). EURUSD gains 5000 points by 23:30
    (about +500 USD, carried); on Friday GBPUSD falls 1000 points and USDJPY 2 yen: the account loses about
    100 + 150 USD today, past a 200 USD limit, while its positions' profit since they opened is about
    +250. Friday's order is refused, and the halt carries the account's day in USD (the yen converted at
    the USDJPY bid now)."""
    live_runner(port, sim, tmp_path / "thursday.jsonl", bars=1).run()
    assert len(sim.state.book.positions) == 3
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +5000)
    sim.market.set_now("2024-03-08 00:30")
    sim.state.book.move("GBPUSD", -1000)
    sim.state.book.move("USDJPY", -2000)
    answers, bids = {}, {}

    class AddGbp(EachOnce):
        def on_bar(self):
            bids.update((s, _tick(sim, s)[0]) for s in self.symbols)  # the bids the order is checked at
            answers["GBPUSD"] = self.buy(0.1, symbol="GBPUSD")

    AddGbp.__name__ = "EachOnce"
    limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=200.0, symbols=EachOnce.symbols)
    journal = tmp_path / "friday.jsonl"
    lines: list[str] = []
    live_runner(port, sim, journal, ea=AddGbp, bars=1, per_symbol=limits, status=lines.append).run()
    assert not answers["GBPUSD"], "a new order was sent after the account lost about 250 USD today"
    shown = [float(line.split(" today ")[1]) for line in lines]
    assert shown and all(v < -200 for v in shown), lines  # the status line shows the account's day too
    notes = [r["terminal"] for r in read_journal(journal) if r.get("source") == "terminal"]
    (halt,) = [n for n in notes if n["event"] == "halted"]
    expected = 0.0
    for symbol, moved in (("EURUSD", 0.0), ("GBPUSD", -0.010), ("USDJPY", -2.0)):
        day_start, _ = _raw_start(sim, symbol)
        start = day_start + (0.05 if symbol == "EURUSD" else 0.0)
        bid = bids[symbol]
        change = (bid - start) * 0.1 * LOTS_UNITS
        expected += change / bid if symbol == "USDJPY" else change
        if symbol != "EURUSD":
            assert abs(bid - start - moved) < 0.002 * (100 if symbol == "USDJPY" else 1)
    assert halt["day_pnl"] == pytest.approx(expected, abs=0.05)
    since_open = sum(
        float(p.profit) for p in sim.conn.modules["MetaTrader5.trading"].positions(sim.state.book)
    )
    assert since_open > 0 > -200 > halt["day_pnl"]


def test_no_bar_at_the_days_start_refuses_new_risk_with_one_log_line(port, sim, caplog):
    """The terminal serves no EURUSD M1 bars: the carried position's value at the day's start cannot be
    known, so new orders are refused (10027) rather than counted as no loss, and it is logged once."""
    sim.market.set_now("2024-03-07 15:00")
    limits = Limits(max_lots=1.0, max_positions=9, max_daily_loss=500.0, symbols=("EURUSD",))
    notes: list[dict] = []
    trade = _trade(port, limits=limits, record=notes.append)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-08 00:30")
    sim.state.configure(no_history=(("EURUSD", 1),))
    with caplog.at_level(logging.ERROR, logger="neuronet.live.terminal_trade"):
        assert trade.order(+1, 0.1, None, None, 777, "") is None
        assert trade.last_retcode == 10027
        assert trade.order(+1, 0.1, None, None, 777, "") is None
    lines = [r.getMessage() for r in caplog.records if "cannot be known" in r.getMessage()]
    assert len(lines) == 1 and "no M1 bar at the start of the server day" in lines[0]
    unknown = [n for n in notes if n["event"] == "unknown day pnl"]
    assert len(unknown) == 1 and unknown[0]["day"] == sim.market._seconds("2024-03-08 00:00") // 86400
    assert [n["retcode"] for n in notes if n["event"] == "refused"] == [10027, 10027]
    assert len(sim.state.book.positions) == 1
    assert trade.day_pnl().unknown


def test_a_weekend_gap_against_a_carried_position_is_mondays_loss(port, sim):
    """Bought 1 lot on Friday; the market opens on Monday 500 points lower (a move made on Sunday, when
    no bar forms). Monday's P&L counts the gap from Friday's last price, as an equity taken at Monday's
    midnight would: the first price of Monday already carries it and would show no loss."""
    sim.market.set_now("2024-03-08 15:00")
    trade = _trade(port)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-10 12:00")  # Sunday
    sim.state.book.move("EURUSD", -500)
    sim.market.set_now("2024-03-11 00:30")
    friday_close, _ = _raw_start(sim, "EURUSD", "2024-03-08 23:59")
    bid, _ = _tick(sim, "EURUSD")
    expected = (bid - friday_close) * LOTS_UNITS
    assert trade.day_pnl().value == pytest.approx(expected, abs=0.02)
    assert expected < -300  # the gap, give or take half an hour's walk


BAD_CLOSE = (
    "import MetaTrader5 as _m\n_from = _m.copy_rates_from\n"
    "def _bad(symbol, timeframe, date_from, count):\n"
    "    rates = _from(symbol, timeframe, date_from, count)\n"
    "    if rates is not None and len(rates):\n"
    "        rates['{field}'] = {value}\n"
    "    return rates\n"
    "_m.copy_rates_from = _bad"
)


@pytest.mark.parametrize(
    ("field", "value"), [("close", "0.0"), ("close", "float('nan')"), ("close", "-1.1"), ("spread", "-5")]
)
def test_a_garbage_price_at_the_days_start_refuses_new_risk(port, sim, field, value):
    """The terminal answers the last bar before midnight with a close of 0, NaN or below zero, or a
    negative spread: the price at the day's start is unknown, never taken as a figure (a close of 0 would
    make a carried buy look like a huge gain today), so new orders are refused."""
    sim.market.set_now("2024-03-07 15:00")
    limits = Limits(max_lots=1.0, max_positions=9, max_daily_loss=500.0, symbols=("EURUSD",))
    trade = _trade(port, limits=limits)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-08 00:30")
    sim.conn.execute(BAD_CLOSE.format(field=field, value=value))
    try:
        assert trade.order(+1, 0.1, None, None, 777, "") is None
        assert trade.last_retcode == 10027 and trade.day_pnl().unknown
    finally:
        sim.conn.execute("_m.copy_rates_from = _from")
    assert len(sim.state.book.positions) == 1


NOT_SYNCED = (
    "import MetaTrader5 as _m\n_from = _m.copy_rates_from\n"
    "def _failed(symbol, timeframe, date_from, count):\n"
    "    _m.SIM.set_error(_m.RES_E_NOT_FOUND)\n"
    "    return None\n"
    "_m.copy_rates_from = _failed"
)


def test_a_failed_read_of_the_last_bar_before_midnight_is_unknown_not_the_days_first_price(port, sim):
    """Bought on Friday; the market opens on Monday 500 points lower. While the terminal fails to answer
    the last M1 bar before Monday's midnight (its history not synchronized yet), Monday's first price,
    which already carries the gap, must not stand in for it (it would hide the loss): today's P&L is
    unknown; once the terminal answers, the gap counts."""
    sim.market.set_now("2024-03-08 15:00")
    trade = _trade(port)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-10 12:00")  # Sunday
    sim.state.book.move("EURUSD", -500)
    sim.market.set_now("2024-03-11 00:30")
    sim.conn.execute(NOT_SYNCED)
    try:
        assert trade.day_pnl().unknown
    finally:
        sim.conn.execute("_m.copy_rates_from = _from")
    friday_close, _ = _raw_start(sim, "EURUSD", "2024-03-08 23:59")
    bid, _ = _tick(sim, "EURUSD")
    figure = trade.day_pnl()
    assert figure.unknown == ()
    assert figure.value == pytest.approx((bid - friday_close) * LOTS_UNITS, abs=0.02)


NO_POSITION_HISTORY = (
    "import MetaTrader5 as _m\n_deals = _m.history_deals_get\n"
    "def _failed(*args, **kwargs):\n"
    "    if 'position' in kwargs:\n"
    "        _m.SIM.set_error(_m.RES_E_NOT_FOUND)\n"
    "        return None\n"
    "    return _deals(*args, **kwargs)\n"
    "_m.history_deals_get = _failed"
)


def test_a_failed_read_of_a_closed_carried_positions_deals_is_unknown_not_todays_whole_profit(port, sim):
    """Bought on Thursday, +1000 points by 23:30, closed on Friday after falling 900. While the terminal
    fails to answer the position's deals (the closing deal is among them, so none is a failure), the
    closing deal's profit (about +100, mostly Thursday's) must not count as today's: it would hide
    today's loss. Today's P&L is unknown, counting no gain; once the terminal answers, the loss counts."""
    trade = _carried_and_closed_friday(port, sim)
    sim.conn.execute(NO_POSITION_HISTORY)
    try:
        figure = trade.day_pnl()
    finally:
        sim.conn.execute("_m.history_deals_get = _deals")
    assert figure.unknown and figure.value <= 0.0
    assert trade.day_pnl().unknown == () and trade.day_pnl().value < 0.0
