"""FractalEA with tiny networks on the NumPy backend: no look-ahead in labels, scaling or predictions."""

import json

import numpy as np
import pytest

import nn
from backtests import Backtest
from datafeeds import read_sample
from strategies import EAError, FractalEA
from strategies.baselines import LogisticRegression
from strategies.features import UNKNOWN, Scaler, bar_features, fractal_labels, windows

# validation=0: every study row trains, for exactly `epochs` epochs (the tests of early stopping set it)
TINY = {"hidden": "12", "epochs": 2, "backend": "numpy", "batch_size": 64, "validation": 0}


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
    assert a.stats.equals(b.stats) and a.predictions == b.predictions
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
    result = Backtest(sample, FractalEA).run(**{**TINY, "validation": 0.25})
    plain = Backtest(sample, FractalEA).run(**TINY)
    rows, val = result.training[0]["rows"], plain.training[0]["rows"]
    assert rows == val - round(val * 0.25) - 1
    assert all(r["val_loss"] is not None and r["val_loss"] > 0 for r in result.training)
    assert all(r["val_loss"] is None for r in plain.training)


def _study_rows(sample, fs, validation):
    """The study period's labelled input rows split as FractalEA must: (training, validation) arrays."""
    study = sample.iloc[:fs]
    feats = bar_features(study.open, study.high, study.low, study.close, study.tick_volume, study.index)
    x, rows = windows(feats, 20)
    labels = fractal_labels(study.high.to_numpy(), study.low.to_numpy())[rows]
    known = labels != UNKNOWN
    x, y, rows = x[known], labels[known], rows[known]
    n_val = round(len(x) * validation)
    if n_val == 0:
        return (x, y, rows), None
    return (x[: -n_val - 1], y[: -n_val - 1], rows[: -n_val - 1]), (x[-n_val:], y[-n_val:], rows[-n_val:])


# A small network with a high learning rate overfits 600 rows within a few epochs: early stopping must act.
OVERFIT = {"hidden": "32", "lr": 0.01, "batch_size": 32, "backend": "numpy", "validation": 0.2}


def test_early_stopping_restores_the_best_validation_epoch(sample):
    bt = Backtest(sample, FractalEA, seed=2)
    result = bt.run(**OVERFIT, epochs=60, patience=3)
    log = result.training
    val = [r["val_loss"] for r in log]
    best = int(np.argmin(val)) + 1
    assert len(log) == best + 3 < 60  # three epochs without a lower validation loss, then stop
    last = log[-1]
    assert last["stopped_early"] and last["kept_epoch"] == best and last["epochs_run"] == len(log)
    assert last["stop_reason"] == "validation loss not lower for 3 epochs"
    assert [r["epoch"] for r in log if r.get("kept")] == [best]
    assert last["kept_val_loss"] == val[best - 1] < min(val[best:])
    # The model holds the best epoch's weights: its loss on the held-out rows is that epoch's, not the last's.
    ea = result.ea_instance
    _, (x_val, y_val, _) = _study_rows(sample, bt.periods.forward_start, 0.2)
    scores = ea.model.evaluate(ea.scaler.transform(x_val), np.eye(3)[y_val])
    assert scores["loss"] == pytest.approx(val[best - 1], rel=1e-9)
    assert ea.outcomes == [{"round": 1, **{k: last[k] for k in ea.outcomes[0] if k != "round"}}]


def test_validation_zero_is_the_old_fixed_epoch_training(sample):
    """validation=0: all labelled study rows, exactly `epochs` epochs, last weights; patience is ignored."""
    bt = Backtest(sample, FractalEA, seed=4)
    result = bt.run(**{**OVERFIT, "validation": 0}, epochs=6, patience=1)
    assert [r["epoch"] for r in result.training] == [1, 2, 3, 4, 5, 6]
    assert all(r["val_loss"] is None for r in result.training)
    last = result.training[-1]
    assert last["kept_epoch"] == 6 and not last["stopped_early"]
    assert "no early stopping: no validation rows" in last["stop_reason"]
    # The same network trained by hand the way FractalEA always did gives the same weights.
    (x, y, _), _ = _study_rows(sample, bt.periods.forward_start, 0.0)
    assert len(x) == last["rows"]
    ea = result.ea_instance
    scaler = Scaler.fit(x)
    assert scaler == ea.scaler
    ref = nn.Sequential.from_specs(
        ea.specs, (240,), loss="cce", optimizer={"type": "adam", "lr": 0.01}, backend="numpy", seed=4
    )
    ref.fit(scaler.transform(x), np.eye(3)[y], epochs=6, batch_size=32, shuffle=True, seed=4, progress=False)
    probe = scaler.transform(x[:50])
    np.testing.assert_array_equal(ea.model.predict(probe), ref.predict(probe))


def test_validation_rows_never_reach_training_or_the_scaler(sample, monkeypatch):
    seen = {}
    fit = nn.Sequential.fit

    def spy(self, x, y, **kw):
        seen["x"], seen["validation"] = x.copy(), kw["validation_data"]
        return fit(self, x, y, **kw)

    monkeypatch.setattr(nn.Sequential, "fit", spy)
    bt = Backtest(sample, FractalEA, seed=1)
    result = bt.run(**{**TINY, "validation": 0.3})
    (x_tr, _, rows_tr), (x_val, _, rows_val) = _study_rows(sample, bt.periods.forward_start, 0.3)
    ea = result.ea_instance
    # No look-ahead: the newest training row's label reads bar j+1, which must precede the first held-out bar.
    assert rows_tr[-1] + 1 < rows_val[0]
    assert result.training[0]["rows"] == len(x_tr) == len(seen["x"])
    # The scaler's statistics are the training rows' own; with the held-out rows they would differ.
    assert ea.scaler == Scaler.fit(x_tr)
    assert not np.allclose(ea.scaler.mean, Scaler.fit(np.concatenate([x_tr, x_val])).mean, rtol=1e-6)
    np.testing.assert_allclose(seen["x"], ea.scaler.transform(x_tr), rtol=1e-12)
    np.testing.assert_allclose(seen["validation"][0], ea.scaler.transform(x_val), rtol=1e-12)


def test_patience_must_not_be_negative(sample):
    with pytest.raises(EAError, match="patience"):
        Backtest(sample, FractalEA).run(**TINY, patience=-1)


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


def test_logistic_baseline_sees_the_training_rows_only(sample, monkeypatch):
    seen = {}
    fit = LogisticRegression.fit

    def spy(self, x, y, classes):
        seen["x"], seen["y"] = x.copy(), y.copy()
        return fit(self, x, y, classes)

    monkeypatch.setattr(LogisticRegression, "fit", spy)
    bt = Backtest(sample, FractalEA, seed=1)
    result = bt.run(**{**TINY, "validation": 0.3})
    (x_tr, y_tr, _), _ = _study_rows(sample, bt.periods.forward_start, 0.3)
    ea = result.ea_instance
    # the network's own training rows, scaled by the training scaler: no validation or forward row
    np.testing.assert_allclose(seen["x"], ea.scaler.transform(x_tr), rtol=1e-12)
    np.testing.assert_array_equal(seen["y"], y_tr)
    base = result.predictions["baselines"]
    assert set(base) == {"always_undefined", "prior_random", "logistic_regression"}
    # scored on the same forward bars as the network
    counts = sum(v["support"] for v in base["logistic_regression"]["per_class"].values())
    assert counts == result.predictions["bars"]


def test_logistic_baseline_predictions_are_its_own_forward_decisions(sample, run):
    bt, result = run
    ea = result.ea_instance
    ev = ea.evaluate_predictions(ea.bars.window(0, len(sample)))
    lin = ev["baselines"]["logistic_regression"]
    assert (np.nonzero(lin != UNKNOWN)[0] == np.nonzero(ev["y_pred"] != UNKNOWN)[0]).all()
    part = sample.iloc[: bt.periods.forward_start + 30]
    feats = bar_features(part.open, part.high, part.low, part.close, part.tick_volume, part.index)
    x, rows = windows(feats, 20)
    expected = np.argmax(ea.linear.predict_proba(ea.scaler.transform(x[-1:])), axis=1)[0]
    assert lin[rows[-1]] == expected


def test_logistic_regression_reaches_the_penalised_optimum():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 7))
    y = np.argmax(x @ rng.normal(size=(7, 3)) + rng.gumbel(size=(400, 3)), axis=1)
    model = LogisticRegression(l2=0.1).fit(x, y, 3)
    a = np.hstack([x, np.ones((400, 1))])
    penalty = np.full((8, 3), 0.1)
    penalty[-1] = 0.0
    grad = a.T @ (model.predict_proba(x) - np.eye(3)[y]) / 400 + penalty * model.coef
    assert np.abs(grad).max() < 1e-8  # the first-order condition of the convex objective
    assert np.allclose(model.predict_proba(x).sum(axis=1), 1.0)
    assert (model.predict_proba(x).argmax(axis=1) == y).mean() > 0.6  # far above the 1/3 of chance
