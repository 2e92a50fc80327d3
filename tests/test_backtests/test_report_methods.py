"""The report's faster steps give exactly what the definitions they replace give, on awkward inputs."""

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest, equity_path, scoring
from backtests.broker.columns import Columns
from backtests.broker.held import Held, held_steps
from backtests.curves import distinct
from datafeeds import synthetic_candles
from strategies.base import ExpertAdvisor


@pytest.mark.parametrize(
    "values",
    [[], [5], [3, 3], [7, 1, 7, 1, 0], [-4, 2, -4, 9, 2, 2], list(range(10, 0, -1))],
    ids=["empty", "one", "a tie", "ties unordered", "negative", "decreasing"],
)
def test_distinct_is_numpys_unique(values):
    a = np.array(values, dtype=np.int64)
    got = distinct(a)
    np.testing.assert_array_equal(got, np.unique(a))
    assert got.dtype == np.int64


def test_distinct_of_many_random_bars_is_numpys_unique():
    a = np.random.default_rng(3).integers(0, 5_000, 40_000)
    np.testing.assert_array_equal(distinct(a), np.unique(a))


def _segments(rng, n, k):
    start = rng.integers(0, n, k)
    return [
        (int(s), int(min(n + 1, s + rng.integers(1, 30))), int(rng.choice([-1, 1])), float(rng.random()),
         1.1 + float(rng.random()), 1.0 + float(rng.random()))
        for s in start
    ]  # fmt: skip


@pytest.mark.parametrize("k", [0, 1, 50])
def test_the_legs_read_at_some_bars_are_those_spread_over_every_bar(k):
    rng = np.random.default_rng(k)
    n = 200
    steps = held_steps(_segments(rng, n, k), n)
    every = steps.spread(steps.legs)
    bars = np.array([0, 1, 5, 50, 199, 199, 7], dtype=np.int64)
    np.testing.assert_array_equal(steps.at(bars), every[:, bars])
    np.testing.assert_array_equal(steps.at(bars[:0]), every[:, :0])


def test_legs_before_the_first_step_are_zero():
    steps = Held(np.array([5, 8]), np.array([[1.0, 2.0]] * 6), 10)
    np.testing.assert_array_equal(
        steps.at(np.array([0, 4, 5, 7, 8, 9])), steps.spread(steps.legs)[:, [0, 4, 5, 7, 8, 9]]
    )


def test_columns_read_once_are_shared_and_cannot_be_changed_by_a_reader():
    cols = Columns([(1, "buy", 0.5, None), (2, "sell", 1.5, 7)], ("bar", "type", "lots", "ns"))
    lots = cols.numbers("lots")
    assert lots is cols.numbers("lots") and lots.tolist() == [0.5, 1.5]
    assert cols.numbers("bar", np.int64).dtype == np.int64 and cols.numbers("bar").dtype == np.float64
    with pytest.raises(ValueError):
        lots[0] = 9.0
    with pytest.raises(ValueError):
        cols.texts("ns")[0] = 1
    assert cols.texts("type").tolist() == ["buy", "sell"] and cols.values("ns") == [None, 7]


def test_a_path_with_nothing_open_for_whole_chunks_is_the_one_read_at_every_price(monkeypatch):
    """Chunks of prices with no position open anywhere are taken at one price a stretch without reading
    the prices; the skeleton and figures are those of the path read at every price (cutting turned off)."""

    class LateTrader(ExpertAdvisor):
        def on_bar(self):
            t = len(self.bars.close)
            if t in (3_000, 3_400):
                self.buy(0.5) if t == 3_000 else self.close()

    seen = {}

    def keep(*args, **kwargs):
        seen["args"] = args
        return equity_path.path_drawdowns(*args, **kwargs)

    monkeypatch.setattr(scoring, "path_drawdowns", keep)
    Backtest(synthetic_candles("EURUSD", "H1", 40_000, seed=2), LateTrader, forward=None).run()
    monkeypatch.undo()
    default = equity_path.path_drawdowns(*seen["args"])
    monkeypatch.setattr(equity_path, "_SPARSE", 2.0)  # every price read, nothing cut
    every = equity_path.path_drawdowns(*seen["args"])
    assert default.drawdowns == every.drawdowns and default.drawdowns["maximal"] > 0
    pd.testing.assert_frame_equal(default.skeleton, every.skeleton)


def test_the_trades_curves_and_equity_tables_are_built_on_first_read_as_they_were_built_at_once(monkeypatch):
    """A run read only for its statistics builds no trades, curves or equity table; read later (after the
    EA trades again through ``ea_instance``), each is the table the run's records give when built at once
    (``broker_figures`` without ``tables``), and the statistics read from the ledger's columns are those
    read from the trades table."""
    from backtests import replay
    from backtests.broker import ledger
    from backtests.result import equity_frame
    from datafeeds import read_sample
    from strategies import SmaCrossEA

    built, kept = [], {}
    original = ledger.Ledger.trades_frame
    monkeypatch.setattr(ledger.Ledger, "trades_frame", lambda self: built.append(1) or original(self))
    score = replay.Backtest._score

    def keep(self, ea, ctx, feed, periods, *args):
        kept["eager"] = scoring.broker_figures(ctx, periods.forward_start, args[0], self.account)
        return score(self, ea, ctx, feed, periods, *args)

    monkeypatch.setattr(replay.Backtest, "_score", keep)
    res = Backtest(read_sample().iloc[:1500], SmaCrossEA).run()
    built.clear()  # (the eager build above)
    assert built == [] and "_trades_table" in vars(res) and callable(vars(res)["_trades_table"])
    assert callable(vars(res)["_curves_table"]) and callable(vars(res)["_equity_table"])
    res.ea_instance.buy(0.1)  # after the run: in none of its tables
    eager = kept["eager"]
    pd.testing.assert_frame_equal(res.trades, eager.trades)
    assert built == [1] and res.trades is res.trades
    pd.testing.assert_frame_equal(res.curves, eager.curves)
    account = res.account
    frame = equity_frame(res.time, eager.balance, eager.equity, eager.curves, account)
    pd.testing.assert_frame_equal(res.equity, frame)
    assert list(res.stats.items()) == list(pd.Series(eager.stats).items())
