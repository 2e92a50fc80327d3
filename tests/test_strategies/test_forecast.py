"""Forecast helpers (windows, baselines, metrics) and ForecastEA run through the backtest harness."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from backtests.report import write_report
from datafeeds import CandleMeta, Timeframe, make_frame
from strategies.baselines import LinearBaseline
from strategies.forecast import ForecastEA
from strategies.forecast_charts import forecast_charts
from strategies.forecast_data import sliding_windows
from strategies.forecasting import direction_accuracy, horizon_errors, naive_forecast


def test_sliding_windows():
    data = np.arange(20.0).reshape(10, 2)
    x, y = sliding_windows(data, 3, 2, start=1, stop=9)
    assert x.shape == (4, 3, 2) and y.shape == (4, 2, 2)
    np.testing.assert_array_equal(x[0], data[1:4])
    np.testing.assert_array_equal(y[3], data[7:9])
    assert sliding_windows(data, 6, 5)[0].shape == (0, 6, 2)


def test_naive_and_metrics():
    x = np.array([[[1.0], [2.0]], [[3.0], [5.0]]])  # (2, 2, 1)
    pred = naive_forecast(x, 3)
    np.testing.assert_array_equal(pred[:, :, 0], [[2, 2, 2], [5, 5, 5]])
    true = np.array([[[3.0], [1.0], [2.0]], [[4.0], [6.0], [5.0]]])
    err = horizon_errors(pred, true)
    np.testing.assert_allclose(err["mse"], [1.0, 1.0, 0.0])
    np.testing.assert_allclose(err["mae"], [1.0, 1.0, 0.0])
    up = pred + np.array([1.0, -1.0, 1.0])[None, :, None]
    # moves vs last: window 0 = (+1, −1, 0), window 1 = (−1, +1, 0); predicted (+, −, +) for both
    assert direction_accuracy(up, true, x[:, -1:, :]) == pytest.approx(0.5)


def test_linear_baseline_recovers_a_linear_map(rng):
    w = rng.normal(size=(4, 6))  # (T, L)
    x = rng.normal(size=(50, 6, 3))
    y = np.einsum("tl,mlc->mtc", w, x) + 0.5
    model = LinearBaseline(l2=0.0).fit(x, y)
    np.testing.assert_allclose(model.predict(x[:5]), y[:5], atol=1e-9)


def _candles(n=420, seed=2):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    close = 1.1 + 0.002 * np.sin(2 * np.pi * t / 16) + np.cumsum(rng.normal(0, 1e-4, n))
    open_ = np.concatenate(([close[0]], close[:-1]))
    data = {
        "open": open_,
        "high": np.maximum(open_, close) + 1e-4,
        "low": np.minimum(open_, close) - 1e-4,
        "close": close,
        "tick_volume": rng.integers(100, 3000, n),
        "spread": np.full(n, 5),
    }
    index = pd.date_range("2022-01-03", periods=n, freq="h", tz="UTC")
    data.update({k: np.round(data[k], 5) for k in ("open", "high", "low", "close")})  # 5-digit prices
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5, source="test"))


PARAMS = dict(seq_len=32, pred_len=8, d_model=8, n_heads=2, d_ff=16, epochs=2, batch_size=32, backend="numpy",
              dropout=0.0)  # fmt: skip


@pytest.mark.parametrize("model", ["atfnet", "patchtst"])
def test_forecast_ea_through_the_harness(model):
    candles = _candles()
    result = Backtest(candles, ForecastEA, forward=0.25).run(model=model, **PARAMS)
    ea = result.ea_instance
    assert result.complete and len(result.training) >= 1
    assert len(result.trades) > 0  # a 16-bar cycle of 40 points against a 5-point spread gets traded
    pred = result.predictions
    assert pred["classes"] == ["no_trade", "down", "up"] and pred["bars"] > 0
    assert "linear_forecast" in pred["baselines"]  # the linear forecast, traded by the same rule
    section = ea.forecast_section(ea.bars.window(0, len(candles)))
    assert set(section["errors"]) == {"model", "naive", "linear"}
    assert len(section["errors"]["model"]["mse"]) == 8 and len(section["examples"]) == 4
    assert min(bar for bar, *_ in ea._log) >= int(len(candles) * 0.75)  # forward period only
    sd = ea.scaler.std[ea._close]  # the training rows' close deviation
    for name, err in section["errors"].items():
        std_err = section["errors_std"][name]
        np.testing.assert_allclose(np.array(std_err["mae"]) * sd, err["mae"], rtol=1e-12)
        np.testing.assert_allclose(np.array(std_err["mse"]) * sd**2, err["mse"], rtol=1e-12)
    weights = np.array(section["weight"]["value"])
    charts = forecast_charts(section)
    assert all(hasattr(chart, "to_serializable") for chart in charts.values())  # Bokeh models
    if model == "atfnet":
        assert np.all((weights >= 0) & (weights <= 1)) and "harmonic_weight" in charts
    else:
        assert np.all(np.isnan(weights)) and set(charts) == {"forecast_vs_actual", "horizon_error"}
    assert result.section is not None and set(result.section.charts) == set(charts)


def test_forecast_section_is_written_into_the_report(tmp_path):
    result = Backtest(_candles(), ForecastEA, forward=0.25).run(model="patchtst", **PARAMS)
    html_path = write_report(result, tmp_path / "run")
    doc = json.loads((tmp_path / "run" / "report.json").read_text())
    assert doc["ea_section"]["title"] == "Forecast"
    assert set(doc["ea_section"]["data"]["errors"]) == {"model", "naive", "linear"}
    page = html_path.read_text()
    section = page.split("<h2>Forecast</h2>", 1)[1]
    for name in result.section.charts:  # the EA's own charts, interactive like the report's
        assert f'data-chart="{name}"' in section


def test_forecast_ea_uses_only_closed_bars():
    """The forecast made at a bar's open equals one from the history cut at that bar: no look-ahead."""
    candles = _candles()
    result = Backtest(candles, ForecastEA, forward=0.25).run(model="patchtst", **PARAMS)
    ea = result.ea_instance
    bar, path, _, _ = ea._log[10]
    cut = np.stack([candles["close"].to_numpy()[:bar]], axis=1)[-32:]
    again, _ = ea._forecast(cut)
    np.testing.assert_allclose(again[:, 0], path, atol=1e-12)


def test_forecast_ea_rejects_bad_channels():
    with pytest.raises(ValueError, match="including close"):
        Backtest(_candles(), ForecastEA, forward=0.25).run(channels="open,volume", **PARAMS)


def test_forecast_ea_scales_with_its_training_rows_only():
    """The scaler sees the rows of the training windows, not the validation windows' newer rows."""
    candles = _candles()
    bt = Backtest(candles, ForecastEA, forward=0.25)
    ea = bt.run(model="patchtst", **PARAMS).ea_instance
    study = candles["close"].to_numpy()[: bt.periods.forward_start]
    windows = len(study) - 32 - 8 + 1
    cut = windows - windows // 10
    rows = study[: cut - 1 + 32 + 8]
    assert ea.scaler.mean == pytest.approx((rows.mean(),), rel=1e-12)
    assert ea.scaler.std == pytest.approx((rows.std(),), rel=1e-12)
    assert ea.scaler.mean != pytest.approx((study.mean(),), rel=1e-9)


def test_forecast_ea_defaults_to_the_auto_backend():
    assert ForecastEA.param_defaults()["backend"] == "auto"


def test_forecast_ea_saves_its_model_with_what_an_export_needs(tmp_path):
    """The saved network forecasts what the EA forecast; the metadata names the channels in the network's
    order, the window, horizon and traded step, the study rows' scaler, the candles and the training."""
    from nn import load

    candles = _candles()
    ea = Backtest(candles, ForecastEA, forward=0.25).run(model="atfnet", channels="high,close", horizon=3,
                                                         **PARAMS).ea_instance  # fmt: skip
    saved = load(ea.save_model(str(tmp_path / "model")), backend="numpy")
    meta = saved.metadata
    assert meta["ea"] == "ForecastEA" and meta["channels"] == ["high", "close"]
    assert (meta["seq_len"], meta["pred_len"], meta["horizon"]) == (32, 8, 3)
    assert meta["scaler"] == ea.scaler.to_dict() and meta["candles"]["symbol"] == "EURUSD"
    assert meta["training_rounds"] == 1 and meta["study_periods"] == [[str(candles.index[0]),
                                                                       str(candles.index[314])]]  # fmt: skip
    bar, path, _, _ = ea._log[5]
    window = candles[["high", "close"]].to_numpy()[bar - 32 : bar]
    again = ea.scaler.inverse(saved.predict(ea.scaler.transform(window)[None])[0])
    np.testing.assert_allclose(again[:, 1], path, rtol=0, atol=1e-12)
    assert ForecastEA().save_model(str(tmp_path / "untrained")) is None
