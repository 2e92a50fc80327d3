"""Swaps of several symbols on one account, hand-computed: each symbol's rates and mode from its
specification, the triple night of its specification, converted into the deposit currency at the rate of
the rollover (a credit sold, a charge bought) and booked in whole cents."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from backtests.broker import AccountConfig
from backtests.broker.portfolio import ConversionError, conversion_pairs, open_brokers
from datafeeds.clock import UTC, BrokerClock
from datafeeds.symbols import BUILTIN

# Wednesday 22:00 and 23:00, then Thursday 00:00 and 01:00 of the server clock (UTC here): the rollover of
# Wednesday night falls between bars 1 and 2
WEDNESDAY = pd.DatetimeIndex(
    ["2024-01-03 22:00", "2024-01-03 23:00", "2024-01-04 00:00", "2024-01-04 01:00"], tz="UTC"
)
MONDAY = WEDNESDAY - pd.Timedelta(days=2)  # the same hours from Monday night: one night


def _cols(price, spread_points, time):
    o = np.full(len(time), float(price))
    return (o, o, o, o, np.full(len(time), float(spread_points)), time)


def _held(specs, prices, side, lots, time=WEDNESDAY, symbol=None):
    """``symbol`` (the first of ``specs``) held ``side`` for ``lots`` from bar 0 to bar 3 among the
    symbols of ``prices`` (symbol -> (price, spread in points)); its closed trade."""
    columns = {s: _cols(p, sp, time) for s, (p, sp) in prices.items()}
    table = {s: specs.get(s, BUILTIN[s]) for s in columns}
    brokers = open_brokers(columns, table, AccountConfig(), UTC)
    name = symbol or next(iter(specs))
    for t in range(4):
        firsts = [b.enter(t) for b in brokers.values()]
        for b, first in zip(brokers.values(), firsts, strict=True):
            b.open_checks(t, first)
        if t == 0:
            assert brokers[name].order(side, lots, None, None, 0, "")
    brokers[name].close(None, None)
    trades = brokers[name].trades_frame()
    assert len(trades) == 1
    return trades.iloc[0], brokers[name]


def test_usdjpy_held_over_the_triple_swap_night_pays_three_nights_in_dollars_at_the_usdjpy_bid():
    spec = replace(BUILTIN["USDJPY"], swap_long=-5.0)  # points per lot per night
    trade, broker = _held({"USDJPY": spec}, {"USDJPY": (151.000, 20)}, +1, 1.0)
    # -5 points x 0.001 x 100,000 x 1 lot x 3 nights = -1,500 JPY, a charge bought with dollars: divided
    # by USDJPY's bid at the rollover, 151.000: -9.9338 -> -9.93
    assert trade["swap"] == -9.93
    assert broker.funds.balance == pytest.approx(10_000 + trade["profit"] - 9.93, abs=1e-9)


def test_a_triple_swap_day_of_the_specification_is_the_day_charged_three_times():
    spec = replace(BUILTIN["USDJPY"], swap_long=-5.0, swap_rollover3days=5)  # on Friday nights
    trade, _ = _held({"USDJPY": spec}, {"USDJPY": (151.000, 20)}, +1, 1.0)
    assert trade["swap"] == -3.31  # one night: -500 JPY / 151.000 = -3.3113


def test_eurgbp_swap_in_pounds_is_bought_with_dollars_at_the_gbpusd_ask():
    spec = replace(BUILTIN["EURGBP"], swap_long=-4.37)
    prices = {"EURGBP": (0.85000, 10), "GBPUSD": (1.25000, 10), "EURUSD": (1.10000, 10)}
    trade, _ = _held({"EURGBP": spec}, prices, +1, 2.0, time=MONDAY)
    # -4.37 points x 0.00001 x 100,000 x 2 lots x 1 night = -8.74 GBP, times GBPUSD's ask 1.25010
    # = -10.9259 -> -10.93
    assert trade["swap"] == -10.93


def test_a_credit_in_pounds_is_sold_at_the_gbpusd_bid():
    spec = replace(BUILTIN["EURGBP"], swap_short=2.0)
    prices = {"EURGBP": (0.85000, 10), "GBPUSD": (1.27000, 10), "EURUSD": (1.10000, 10)}
    trade, _ = _held({"EURGBP": spec}, prices, -1, 1.0, time=MONDAY)
    assert trade["swap"] == 2.54  # 2.00 GBP x 1.27000


def test_a_swap_in_the_base_currency_is_converted_through_the_base_currencys_pair():
    spec = replace(BUILTIN["EURGBP"], swap_long=-3.0, swap_mode="currency_symbol")  # EUR per lot
    prices = {"EURGBP": (0.85000, 10), "GBPUSD": (1.25000, 10), "EURUSD": (1.10000, 10)}
    trade, _ = _held({"EURGBP": spec}, prices, +1, 1.0, time=MONDAY)
    assert trade["swap"] == -3.30  # -3 EUR x EURUSD's ask 1.10010 = -3.3003


def test_a_swap_in_the_deposit_currency_is_booked_as_it_is():
    spec = replace(BUILTIN["USDJPY"], swap_short=-7.25, swap_mode="currency_deposit")
    trade, _ = _held({"USDJPY": spec}, {"USDJPY": (151.000, 20)}, -1, 0.4)
    assert trade["swap"] == -8.70  # -7.25 x 0.4 lots x 3 nights = -8.70 USD


def test_an_interest_swap_on_the_opening_price_over_a_360_day_year():
    spec = replace(BUILTIN["USDJPY"], swap_long=-2.5, swap_mode="interest_open")  # % a year
    trade, _ = _held({"USDJPY": spec}, {"USDJPY": (150.000, 20)}, +1, 1.0, time=MONDAY)
    # opened at the ask 150.020: 100,000 x 150.020 = 15,002,000 JPY x -2.5 % / 360 = -1,041.81 JPY,
    # divided by the bid 150.000 = -6.9454 -> -6.95
    assert trade["swap"] == -6.95


def test_an_interest_swap_on_the_current_price_values_a_short_at_the_ask():
    spec = replace(BUILTIN["EURGBP"], swap_short=1.8, swap_mode="interest_current")
    prices = {"EURGBP": (0.84000, 10), "GBPUSD": (1.25000, 10), "EURUSD": (1.10000, 10)}
    trade, _ = _held({"EURGBP": spec}, prices, -1, 1.0, time=MONDAY)
    # 100,000 x the ask 0.84010 = 84,010 GBP x 1.8 % / 360 = 4.2005 GBP, a credit: x GBPUSD's bid 1.25
    assert trade["swap"] == 5.25  # 5.2506


def test_a_disabled_swap_charges_nothing():
    spec = replace(BUILTIN["USDJPY"], swap_long=-5.0, swap_mode="disabled")
    trade, _ = _held({"USDJPY": spec}, {"USDJPY": (151.000, 20)}, +1, 1.0)
    assert trade["swap"] == 0.0


def test_a_swap_currency_without_its_pair_is_refused_by_name():
    # a CFD's margin is in its profit currency, so only the swap's euros need EURUSD
    spec = replace(BUILTIN["EURGBP"], swap_long=-3.0, swap_mode="currency_symbol", calc_mode="cfd")
    with pytest.raises(ConversionError, match=r"EURGBP: its swap in EUR needs EURUSD or USDEUR"):
        _held({"EURGBP": spec}, {"EURGBP": (0.85, 10), "GBPUSD": (1.25, 10)}, +1, 1.0)


def test_the_command_lines_loader_fetches_the_swap_currencys_pair_too():
    spec = replace(BUILTIN["EURGBP"], margin_currency="GBP", calc_mode="cfd", swap_long=-3.0)
    assert conversion_pairs(["EURGBP"], "USD", {"EURGBP": spec}) == ["GBPUSD"]  # points: in pounds
    euros = replace(spec, swap_mode="currency_symbol")
    assert conversion_pairs(["EURGBP"], "USD", {"EURGBP": euros}) == ["GBPUSD", "EURUSD"]


def test_the_rollover_is_the_servers_midnight_not_utcs():
    """Wednesday 20:00 to 23:00 UTC: on a UTC server no midnight passes; on a UTC+2 server its Wednesday
    midnight falls at 22:00 UTC, and that is the triple night."""
    spec = replace(BUILTIN["USDJPY"], swap_long=-5.0)
    evening = WEDNESDAY - pd.Timedelta(hours=2)  # 20:00 .. 23:00 UTC on Wednesday
    columns = {"USDJPY": _cols(151.000, 20, evening)}
    swaps = {}
    for clock in (UTC, BrokerClock(2.0)):
        brokers = open_brokers(columns, {"USDJPY": spec}, AccountConfig(), clock)
        jpy = brokers["USDJPY"]
        for t in range(4):
            jpy.open_checks(t, jpy.enter(t))
            if t == 0:
                assert jpy.order(+1, 1.0, None, None, 0, "")
        jpy.close(None, None)
        swaps[clock.utc_offset_hours] = jpy.trades_frame()["swap"].iloc[0]
    assert swaps == {0.0: 0.0, 2.0: -9.93}  # three nights, -1,500 JPY / 151.000
