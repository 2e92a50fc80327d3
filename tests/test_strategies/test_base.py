"""ExpertAdvisor parameters, the trading API's stop arithmetic and position/account queries."""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import CandleMeta, Timeframe, make_frame
from strategies import EAError, EARuntimeError, ExpertAdvisor


class Params(ExpertAdvisor):
    period: int = 14
    level: float = 0.5
    use_filter: bool = False
    label: str = "x"


def test_parameters_from_strings_take_the_default_type():
    ea = Params(period="20", level="0.25", use_filter="yes", label=5)
    assert (ea.period, ea.level, ea.use_filter, ea.label) == (20, 0.25, True, "5")
    assert ea.params["period"] == 20 and Params.period == 14  # the class keeps its default


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"perod": 3}, "did you mean 'period'"),
        ({"period": "2.5"}, "expects int"),
        ({"use_filter": "maybe"}, "expects bool"),
        ({"zzz": 1}, "known: "),
    ],
)
def test_bad_parameters_are_named(given, message):
    with pytest.raises(EAError, match=message):
        Params(**given)


def test_trading_outside_a_backtest_is_a_clear_error():
    with pytest.raises(EAError, match="not attached to a backtest"):
        Params().buy(0.1)


def _candles(n=60):
    close = np.linspace(1.1, 1.2, n)
    data = {
        "open": close,
        "high": close + 1e-3,
        "low": close - 1e-3,
        "close": close,
        "spread": np.full(n, 20),
    }
    index = pd.date_range("2022-01-03", periods=n, freq="h", tz="UTC")
    data.update({k: np.round(data[k], 5) for k in ("open", "high", "low", "close")})  # 5-digit prices
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5))


def test_stops_in_points_are_measured_from_the_fill_and_queries_report_state():
    class Trader(ExpertAdvisor):
        def on_init(self):
            self.log = []

        def on_bar(self):
            if len(self.bars) == 40:
                self.ticket = self.buy(0.5, sl_points=150, tp_points=300, magic=7, comment="test")
            elif len(self.bars) == 41:
                self.log.append((self.positions(), self.position, self.account))

    result = Backtest(_candles(), Trader, forward="1/2", account=AccountConfig(deposit=5000.0)).run()
    ea = result.ea_instance
    df = _candles()
    ask = df.open.iloc[40] + 20e-5
    (positions, net, account) = ea.log[0]
    pos = positions[0]
    assert pos.ticket == ea.ticket and pos.magic == 7 and pos.comment == "test" and net == 0.5
    assert pos.price_open == pytest.approx(ask)
    assert pos.sl == pytest.approx(ask - 150e-5) and pos.tp == pytest.approx(ask + 300e-5)
    assert account.margin == pytest.approx(0.5 * 100_000 * ask / 100)
    assert account.balance == 5000.0 and account.free_margin == pytest.approx(account.equity - account.margin)
    assert result.trades.iloc[0].exit_reason == "tp"


def test_stop_as_price_and_points_together_is_refused():
    class Both(ExpertAdvisor):
        def on_bar(self):
            self.buy(0.1, sl=1.0, sl_points=10)

    with pytest.raises(EARuntimeError, match=r"Both.on_bar raised at bar 40 .*EAError: .*price or in") as e:
        Backtest(_candles(), Both, forward="1/3").run()
    assert isinstance(e.value.original, EAError) and e.value.__cause__ is e.value.original


@pytest.mark.parametrize("name", ["bars", "params", "position", "buy", "run_info", "describe"])
def test_a_parameter_may_not_hide_the_base_classs_api(name):
    """``bars = 24`` as a lookback would be silently replaced by the harness's Bars: refuse the name."""
    Clash = type("Clash", (ExpertAdvisor,), {name: 24})
    with pytest.raises(EAError, match=f"Clash.{name}: a parameter of that name would hide"):
        Clash()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400"])
def test_a_non_finite_integer_parameter_is_refused(value):
    with pytest.raises(EAError, match="expects int"):
        Params(period=value)
