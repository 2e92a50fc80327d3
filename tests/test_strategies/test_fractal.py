"""FractalEA with tiny networks on the NumPy backend: no look-ahead in labels, scaling or predictions."""

import json

import numpy as np
import pytest

import nn
from backtests import Backtest
from datafeeds import read_sample
from strategies import EAError, FractalEA
from strategies.features import UNKNOWN, bar_features, fractal_labels, windows

TINY = {"hidden": "12", "epochs": 2, "backend": "numpy", "batch_size": 64}


@pytest.fixture(scope="module")
def sample():
    return read_sample(spread=10).iloc[:900]


@pytest.fixture(scope="module")
def run(sample):
    bt = Backtest(sample, FractalEA, forward="1/3", seed=7)
    return bt, bt.run(**TINY)


def test_training_rows_stop_before_the_unlabelled_newest_bar(sample, run):
    bt, result = run
    fs = bt.periods.forward_start
    study = sample.iloc[:fs]
    feats = bar_features(study.open, study.high, study.low, study.close, study.tick_volume, study.index)
    x, rows = windows(feats, 20)
    labels = fractal_labels(study.high.to_numpy(), study.low.to_numpy())
    assert labels[fs - 1] == UNKNOWN  # needs bar fs, which was not closed at training time
    expected = int((labels[rows] != UNKNOWN).sum())
    assert result.training[0]["rows"] == expected == len(rows) - 1
    assert [r["epoch"] for r in result.training] == [1, 2]
    # The scaler saw exactly those study rows, nothing from the forward period.
    ea = result.ea_instance
    np.testing.assert_allclose(ea.scaler.mean, x[labels[rows] != UNKNOWN].mean(axis=0), rtol=1e-12)


def test_predictions_cover_forward_bars_only_and_match_a_fresh_predict(sample, run):
    bt, result = run
    fs = bt.periods.forward_start
    ev = result.ea_instance.evaluate_predictions(result.ea_instance.bars.window(0, len(sample)))
    decided = np.nonzero(ev["y_pred"] != UNKNOWN)[0]
    # The first decision (at the open of bar fs) is about bar fs-1; the last about the second-to-last bar.
    assert decided[0] == fs - 1 and decided[-1] == len(sample) - 2
    ea = result.ea_instance
    part = sample.iloc[: fs + 50]
    feats = bar_features(part.open, part.high, part.low, part.close, part.tick_volume, part.index)
    x, rows = windows(feats, 20)
    p = ea.model.predict(ea.scaler.transform(x[-1:]))
    np.testing.assert_allclose(ev["proba"][rows[-1]], p[0], rtol=1e-10)
    assert result.predictions["bars"] == len(sample) - 1 - fs


def test_trading_rule_threshold_and_exit_after_n_bars(sample):
    quiet = Backtest(sample, FractalEA, seed=1).run(**TINY, trade=False)
    assert quiet.stats["total_trades"] == 0 and quiet.predictions["bars"] > 0
    busy = Backtest(sample, FractalEA, seed=1).run(
        **TINY, threshold=0.0, exit_bars=3, sl_points=0, tp_points=0
    )
    trades = busy.trades
    assert len(trades) > 5
    held = trades.exit_bar - trades.entry_bar
    assert (held[trades.exit_reason == "signal"] <= 3).all()


def test_same_seed_same_numbers(sample):
    a = Backtest(sample, FractalEA, seed=3).run(**TINY)
    b = Backtest(sample, FractalEA, seed=3).run(**TINY)
    assert a.stats == b.stats and a.predictions == b.predictions
    assert [r["loss"] for r in a.training] == [r["loss"] for r in b.training]


def test_online_mode_batch_size_one(sample):
    result = Backtest(sample.iloc[:400], FractalEA).run(**{**TINY, "batch_size": 1, "epochs": 1})
    assert len(result.training) == 1 and np.isfinite(result.training[0]["loss"])


def test_layer_descriptions_replace_the_default_network(sample):
    layers = json.dumps(
        [
            {"type": "dense", "units": 8, "activation": "relu"},
            {"type": "dense", "units": 3, "activation": "softmax"},
        ]
    )
    result = Backtest(sample, FractalEA).run(**{**TINY, "layers": layers})
    assert result.ea_instance.model.parameter_count == 240 * 8 + 8 + 8 * 3 + 3
    bad = json.dumps([{"type": "dense", "units": 2, "activation": "softmax"}])
    with pytest.raises(EAError, match="must end with"):
        Backtest(sample, FractalEA).run(**{**TINY, "layers": bad})


def test_default_network_is_the_part5_stack():
    ea = FractalEA()
    ea.on_init()
    assert [s["units"] for s in ea.specs] == [500, 250, 125, 62, 3]
    assert {s["activation"] for s in ea.specs[:-1]} == {"tanh"} and ea.specs[-1]["activation"] == "softmax"


def test_saved_model_carries_the_scaler_and_reloads(run, tmp_path):
    _, result = run
    # save_model directly: the report tests cover write_report (its charts cost seconds)
    written = result.ea_instance.save_model(str(tmp_path / "model"))
    model = nn.load(written)
    meta = model.metadata
    assert meta["scaler"] == result.ea_instance.scaler.to_dict()
    assert meta["features"][0] == "close-open" and meta["depth"] == 20 and meta["rule"] == "3bar"
    x = np.random.default_rng(0).normal(size=(4, 240))
    np.testing.assert_allclose(model.predict(x), result.ea_instance.model.predict(x), rtol=1e-12)


def test_too_short_study_period_is_refused(sample):
    with pytest.raises(ValueError, match="too few bars"):
        Backtest(sample.iloc[:150], FractalEA)


def test_validation_rows_come_from_the_end_of_the_study_period(sample):
    result = Backtest(sample, FractalEA).run(**TINY, validation=0.25)
    plain = Backtest(sample, FractalEA).run(**TINY)
    rows, val = result.training[0]["rows"], plain.training[0]["rows"]
    assert rows == val - round(val * 0.25) - 1
    assert all(r["val_loss"] is not None and r["val_loss"] > 0 for r in result.training)
    assert all(r["val_loss"] is None for r in plain.training)


def test_era_rates_match_a_fresh_prediction_on_the_training_rows(sample, run):
    from strategies.fractal import signal_rates

    bt, result = run
    fs = bt.periods.forward_start
    study = sample.iloc[:fs]
    feats = bar_features(study.open, study.high, study.low, study.close, study.tick_volume, study.index)
    x, rows = windows(feats, 20)
    labels = fractal_labels(study.high.to_numpy(), study.low.to_numpy())[rows]
    known = labels != UNKNOWN
    ea = result.ea_instance
    pred = np.argmax(ea.model.predict(ea.scaler.transform(x[known])), axis=1)
    last = result.training[-1]
    assert (last["train_hit_rate"], last["train_missed_rate"]) == pytest.approx(
        signal_rates(labels[known], pred)
    )


def test_signal_rates_by_hand():
    from strategies.fractal import signal_rates

    y_true = np.array([0, 1, 2, 1, 0, 2])
    y_pred = np.array([1, 1, 0, 2, 0, 2])
    hit, missed = signal_rates(y_true, y_pred)
    assert hit == pytest.approx(2 / 4) and missed == pytest.approx(1 / 4)
