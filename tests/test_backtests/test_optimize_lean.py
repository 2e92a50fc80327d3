"""An optimisation pass computes only the figures it keeps, and each is the number ``Backtest.run()``'s report
gives: for a plain SMA cross, pending orders with a trailed stop, SL/TP on both sides of a hedging account
with a custom criterion, and several symbols; alone or with others; in the results table, the study store
and the forward windows. What a pass does not read is never built."""

from __future__ import annotations

import numpy as np
import optuna
import pandas as pd
import pytest
from test_backtests.pass_eas import HEDGING, Flip, HedgedBrackets, Idle, TrailingBreakout, flip_frames

from backtests import AccountConfig, Backtest, scoring
from backtests.broker.ledger import Ledger
from backtests.errors import StatisticError
from backtests.optimize import optimize
from backtests.optimize.criteria import PASS_STATS, get_criterion
from backtests.optimize.passes import Job, Window, daily_returns, make_backtest, run_curve
from backtests.optimize.store import storage_url
from backtests.statistics import TABLE
from datafeeds.sample import read_sample
from neuronet.errors import NeuronetError
from strategies import SmaCrossEA

ALL = [s.key for s in TABLE]
SMALL = AccountConfig(hedging=True, deposit=500.0)  # HedgedBrackets(size=20) is stopped out on it


def _same(got, expected, key: str) -> None:
    assert type(got) is type(expected) and (got == expected or got is expected), (key, got, expected)


@pytest.fixture(scope="module")
def candles() -> pd.DataFrame:
    return read_sample(spread=10).iloc[:1000]


def _cases(candles):
    return [
        ("sma", Backtest(candles, SmaCrossEA, forward="1/3"), {"fast": 5, "slow": 30}),
        ("pending", Backtest(candles, TrailingBreakout, forward=None), {"trail": 150}),
        (
            "hedging",
            Backtest(candles, HedgedBrackets, forward=None, account=HEDGING),
            {"every": 3, "sl": 120},
        ),
        ("symbols", Backtest(flip_frames(400), Flip), {}),
        ("idle", Backtest(candles, Idle, forward=None), {}),
        ("blown", Backtest(candles, HedgedBrackets, forward=None, account=SMALL), {"size": 20.0}),
    ]


@pytest.mark.parametrize("case", range(6), ids=["sma", "pending", "hedging", "symbols", "idle", "blown"])
def test_a_pass_has_the_reports_figures_asked_alone_in_groups_or_all(candles, case):
    name, bt, params = _cases(candles)[case]
    full = bt.run(**params)
    assert (full.stats["total_trades"] > 10) != (name == "idle"), name
    if name == "blown":
        assert "stop out" in set(full.trades["exit_reason"])
    for keys in (PASS_STATS, ALL, *(g.keys for g in scoring.GROUPS)):
        lean = bt.run_pass(params, keys)
        # an EA scoring itself is handed every figure; several symbols run in full
        grouped = {k for g in scoring.groups_of(keys) for k in g.keys}
        computed = set(ALL) if name in ("hedging", "symbols", "blown") else grouped
        assert set(lean.stats) == computed >= set(keys)
        for key in lean.stats:
            _same(lean.stats[key], full.stats[key], key)
    _same(lean.custom_criterion, full.custom_criterion, "custom")
    np.testing.assert_array_equal(lean.time.asi8, full.time.asi8)
    np.testing.assert_array_equal(lean.equity, full.equity["equity"].to_numpy())
    np.testing.assert_array_equal(lean.curve_time.asi8, full.curves.index.asi8)
    np.testing.assert_array_equal(lean.curve_equity, full.curves["equity"].to_numpy())


def test_an_ea_that_scores_itself_is_handed_every_figure(candles):
    seen = []

    class Recorder(HedgedBrackets):
        def on_tester(self, stats):
            seen.append(stats)
            return super().on_tester(stats)

    class SetLate(TrailingBreakout):  # on_tester given to the instance, not the class
        def on_init(self):
            self.on_tester = lambda stats: seen.append(stats) or stats["total_deals"]

    bt = Backtest(candles, Recorder, forward=None, account=HEDGING)
    lean = bt.run_pass({}, ["final_balance"])
    full = bt.run()
    assert list(seen[0]) == ALL and seen[0] == seen[1] == dict(full.stats)
    assert lean.custom_criterion == full.custom_criterion is not None
    late = Backtest(candles, SetLate, forward=None).run_pass({}, ["final_balance"])
    assert list(seen[2]) == ALL and late.custom_criterion == seen[2]["total_deals"] > 0


def test_an_ea_rewriting_the_figures_it_is_handed_changes_no_recorded_figure(candles):
    class Liar(TrailingBreakout):
        def on_tester(self, stats):
            stats["final_balance"] = stats["total_trades"] = 1e9
            return 1.0

    honest = Backtest(candles, TrailingBreakout, forward=None).run().stats
    lean = Backtest(candles, Liar, forward=None).run_pass({}, PASS_STATS)
    assert lean.stats["final_balance"] == honest["final_balance"] < 1e9
    assert lean.stats["total_trades"] == honest["total_trades"] and lean.custom_criterion == 1.0


def test_a_pass_builds_no_table_and_no_worst_prices_unless_a_figure_reads_them(candles, monkeypatch):
    bt = Backtest(candles, TrailingBreakout, forward=None)
    expected = bt.run(trail=300).stats

    def refuse(self, *args):
        raise AssertionError("built for a pass")

    for table in ("trades_frame", "orders_frame", "deals_frame", "worst_curves"):
        monkeypatch.setattr(Ledger, table, refuse)
    lean = bt.run_pass({"trail": 300}, PASS_STATS)
    assert lean.stats["equity_drawdown_relative_pct"] == expected["equity_drawdown_relative_pct"]
    with pytest.raises(AssertionError, match="built for a pass"):
        bt.run_pass({"trail": 300}, ["margin_level_min_pct"])  # read at each bar's worst prices


def test_an_unknown_statistic_is_refused_by_name_before_the_run(candles, monkeypatch):
    """A misspelt key, a key of another type, and one string where a list of keys is due are refused in
    one line naming them, before any bar is replayed."""
    bt = Backtest(candles, SmaCrossEA)
    monkeypatch.setattr(Backtest, "_replay", lambda *a: pytest.fail("replayed"))
    with pytest.raises(
        StatisticError, match=r"'equity_drawdwn_relative_pct' \(did you mean 'equity_drawdown_rel"
    ):
        bt.run_pass({}, ["final_balance", "equity_drawdwn_relative_pct"])
    with pytest.raises(KeyError, match="no statistic named '3'"):
        bt.run_pass({}, [3])
    with pytest.raises(NeuronetError, match="as a list, not the string 'final_balance'"):
        bt.run_pass({}, "final_balance")


def test_every_statistic_is_computed_by_exactly_one_group():
    keys = [k for g in scoring.GROUPS for k in g.keys]
    assert sorted(keys) == sorted(ALL) and len(keys) == len(set(keys))


def test_the_optimisation_and_its_store_keep_the_reports_figures_pass_by_pass(candles, tmp_path):
    """A grid on a hedging account ranked by the EA's own criterion: every column of the results table,
    read back from the study store by a second run, is the plain backtest's, daily returns included."""
    space = {"every": [3, 5], "sl": [100, 250], "tp": [150, 400]}
    db = str(tmp_path / "study.db")
    common = {"criterion": "custom", "account": HEDGING, "store_path": db, "workers": 0}
    table = optimize(candles, HedgedBrackets, space, **common).sort_values("pass")
    again = optimize(candles, HedgedBrackets, space, **common).sort_values("pass")
    assert again.attrs["ran"] == 0 and len(table) == 8
    bt = Backtest(candles, HedgedBrackets, forward=None, account=HEDGING)
    for row, stored in zip(table.itertuples(), again.itertuples(), strict=True):
        full = bt.run(every=row.every, sl=row.sl, tp=row.tp)
        assert row.criterion == stored.criterion == full.custom_criterion
        for key in PASS_STATS:
            expected = full.stats[key]
            for got in (getattr(row, key), getattr(stored, key)):
                assert got == pytest.approx(
                    np.nan if expected is None else expected, rel=0, abs=0, nan_ok=True
                )
    # the robustness statistics read each pass's daily returns from the store
    url = storage_url(db)
    (name,) = optuna.get_all_study_names(url)
    trials = optuna.load_study(study_name=name, storage=url).get_trials()
    assert len(trials) == 8
    for trial in trials:
        full = bt.run(**trial.params)
        expected = daily_returns(full.curves.index, full.curves["equity"].to_numpy())
        assert trial.user_attrs["stats"]["daily_returns"] == expected


def test_a_forward_window_keeps_the_runs_equity(candles):
    """Walk-forward test windows and forward tests keep a pass's equity at each close."""
    job = Job(TrailingBreakout, get_criterion("balance"))
    window = Window(100, 950, trade_from=600)
    row = run_curve(candles, job, window, {"trail": 120})
    full = make_backtest(candles, job, window).run(trail=120)
    np.testing.assert_array_equal(row["time"], full.time.asi8)
    np.testing.assert_array_equal(row["equity"], full.equity["equity"].to_numpy())
    assert row["value"] == full.stats["final_balance"]


def test_kept_indicator_proofs_change_no_column_of_the_results_or_the_walk_forward(candles, monkeypatch):
    """Passes that repeat an indicator take its values from the proof an earlier pass made; every column
    of the results table, the robustness statistics and each walk-forward window are those of passes that
    prove every indicator again (a cache that keeps nothing)."""
    from backtests import replay
    from backtests.indicator_cache import PROVEN, ProvenIndicators
    from backtests.optimize import walk_forward

    space = {"fast": [3, 5, 8], "slow": [20, 30, 45]}

    def run() -> tuple[pd.DataFrame, dict, pd.DataFrame]:
        table = optimize(candles, SmaCrossEA, space, workers=0, forward="1/3", top=3)
        wf = walk_forward(candles, SmaCrossEA, space, 300, 150, workers=0)
        return table.drop(columns="seconds"), table.attrs, wf.windows

    PROVEN.clear()
    hits = PROVEN.hits
    kept = run()
    assert PROVEN.hits > hits
    monkeypatch.setattr(replay, "PROVEN", ProvenIndicators(budget=0))
    proved = run()
    pd.testing.assert_frame_equal(kept[0], proved[0], check_exact=True)
    assert kept[1]["robustness"]["deflated_sharpe"]["dsr"] > 0 and kept[1] == proved[1]
    pd.testing.assert_frame_equal(kept[2], proved[2], check_exact=True)
