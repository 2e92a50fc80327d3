"""``Limits``: what each limit refuses, and the values a careless command line could give it. How the
limits stop requests before ``order_send`` on a terminal is in ``test_terminal_trade.py``."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from neuronet.errors import NeuronetError
from neuronet.live.day_pnl import DayPnl
from neuronet.live.limits import AccountLimits, AccountState, Limits, LimitsError, Request, TradeState

OK_STATE = TradeState(exposures=0, day_pnl=0.0)


def limits(**kw) -> Limits:
    base = {"max_lots": 1.0, "max_positions": 2, "max_daily_loss": 100.0, "symbols": ("EURUSD", "GBPUSD")}
    return Limits(**{**base, **kw})


def test_a_request_within_every_limit_passes():
    assert limits().check(Request("EURUSD", 1.0), TradeState(1, -99.99)) is None


@pytest.mark.parametrize(
    ("request_", "state", "words"),
    [
        (Request("EURUSD", 1.01), OK_STATE, "exceed the limit of 1 lots"),
        (Request("USDJPY", 0.1), OK_STATE, "not among the allowed symbols EURUSD, GBPUSD"),
        (Request("EURUSD", 0.1), TradeState(2, 0.0), "the limit is 2"),
        (Request("EURUSD", 0.1), TradeState(0, -100.0), "daily loss limit 100 reached"),
        (Request("EURUSD", 0.1), TradeState(0, 50.0, halted=True), "until the server day ends"),
    ],
    ids=["lots", "symbol", "positions", "daily-loss", "halted-today"],
)
def test_each_limit_refuses_with_a_reason(request_, state, words):
    assert words in limits().check(request_, state)


def test_the_kill_switch_file_refuses_new_orders_while_it_exists(tmp_path):
    stop = tmp_path / "STOP"
    lim = limits(kill_switch=str(stop))
    assert isinstance(lim.kill_switch, Path) and lim.check(Request("EURUSD", 0.1), OK_STATE) is None
    stop.touch()
    assert "kill-switch file" in lim.check(Request("EURUSD", 0.1), OK_STATE)
    stop.unlink()
    assert lim.check(Request("EURUSD", 0.1), OK_STATE) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_lots", 0),
        ("max_lots", -1.0),
        ("max_lots", math.nan),
        ("max_lots", math.inf),
        ("max_lots", "1"),
        ("max_lots", True),
        ("max_daily_loss", 0.0),
        ("max_daily_loss", math.nan),
        ("max_positions", 0),
        ("max_positions", 1.5),
        ("max_positions", True),
        ("symbols", ()),
        ("symbols", ("EURUSD", " ")),
        ("symbols", 5),
    ],
)
def test_unusable_limits_are_refused_naming_the_limit(field, value):
    with pytest.raises(LimitsError, match=field.split("_")[0]) as err:
        limits(**{field: value})
    assert isinstance(err.value, NeuronetError) and isinstance(err.value, ValueError)


def test_a_kill_switch_that_could_never_be_created_is_refused(tmp_path):
    with pytest.raises(LimitsError, match="empty path"):
        limits(kill_switch="")
    with pytest.raises(LimitsError, match="does not exist"):
        limits(kill_switch=tmp_path / "no-such-folder" / "STOP")


def test_one_symbol_given_as_text_is_one_symbol():
    assert limits(symbols="EURUSD").symbols == ("EURUSD",)
    assert limits().to_dict()["symbols"] == ["EURUSD", "GBPUSD"]


def test_a_multi_symbol_limit_judges_the_one_reading_it_is_given_and_a_one_symbol_limit_reads_none():
    """A request reads the account once (``read``) and ``check`` judges that reading: the account's day
    P&L and its exposures, never a second read of the terminal; a one-symbol run has no account side."""
    reads: list[int | None] = []

    def state(day: int | None) -> AccountState:
        reads.append(day)
        return AccountState(3, DayPnl(-250.0))

    per_symbol = Limits(max_lots=1.0, max_positions=2, max_daily_loss=100.0, symbols=("EURUSD",))
    account = AccountLimits(per_symbol, 3, state)
    assert per_symbol.read(19_000) is None
    reading = account.read(19_000)
    assert reads == [19_000]
    own = TradeState(0, 0.0, day=19_000, account=reading)  # the symbol itself: flat, nothing lost today
    assert "daily loss limit 100 reached (today's P&L -250.00)" in account.check(Request("EURUSD", 0.1), own)
    calm = replace(own, account=AccountState(3, DayPnl(-10.0)))
    assert "account-wide limit is 3" in account.check(Request("EURUSD", 0.1), calm)
    assert reads == [19_000]


def test_an_account_limit_check_given_no_reading_is_refused_and_reads_nothing():
    """``AccountLimits.check`` read the account itself when the request gave it no reading: the day's halt
    and the account-wide limits could then be judged on two readings. The reading is now required."""
    reads: list[int | None] = []

    def state(day: int | None) -> AccountState:
        reads.append(day)
        return AccountState(0, DayPnl(0.0))

    per_symbol = Limits(max_lots=1.0, max_positions=2, max_daily_loss=100.0, symbols=("EURUSD",))
    account = AccountLimits(per_symbol, 3, state)
    with pytest.raises(LimitsError, match=r"needs the account as this request read it \(TradeState\.account"):
        account.check(Request("EURUSD", 0.1), TradeState(0, 0.0, day=19_000))
    assert reads == []
    assert isinstance(LimitsError("x"), ValueError) and isinstance(LimitsError("x"), NeuronetError)
    assert (
        account.check(Request("EURUSD", 0.1), TradeState(0, 0.0, day=19_000, account=account.read(19_000)))
        is None
    )
    assert reads == [19_000]
