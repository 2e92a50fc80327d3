"""An EA retrained walk-forward (retrain_every) traded with several models; its file holds the last one. The
export refuses it unless told to take the last model, then says from which bar on its backtest is the EA's."""

import logging

import numpy as np
import pandas as pd
import pytest
from test_export.export_support import run_forecast, run_fractal

from backtests import Backtest
from neuronet.cli import main
from strategies import OnnxEA
from strategies.errors import ExportError
from strategies.export import FORECAST_TOLERANCE, TOLERANCE, export


@pytest.fixture(scope="module")
def retrained(candles):
    return run_fractal(candles, retrain_every=200)  # the 500 forward bars: 3 models


def test_a_retrained_ea_is_refused_without_last_model(retrained, tmp_path):
    ea = retrained.ea_instance
    assert ea.rounds == 3
    with pytest.raises(ExportError, match=r"FractalEA was trained 3 times walk-forward \(retrain_every=200\)"
                       r".*trained on 2017-04-19 09:00:00\+00:00 \.\. 2017-07-10 16:00:00\+00:00.*"
                       "--last-model"):  # fmt: skip
        export(ea, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_last_model_decides_as_the_ea_from_its_retraining_on(retrained, candles, tmp_path, caplog):
    """The warning names the bar; from it on the ONNX model's probabilities are the EA's, before it not."""
    ea = retrained.ea_instance
    with caplog.at_level(logging.WARNING, logger="strategies.export"):
        done = export(ea, tmp_path, last_model=True)
    end = ea._study_span[-1][1]
    assert done.warning in caplog.text and f"decides as the EA did from the bar that closed at {end} on" in (
        done.warning
    )
    first = candles.index.get_loc(pd.Timestamp(end))  # the bar whose close the last retraining saw
    onnx_ea = Backtest(candles, OnnxEA, forward="1/3", seed=7).run(model=str(done.onnx_path)).ea_instance
    got = onnx_ea.signal.values  # the model's output at every bar of the run
    later = [j for j in sorted(ea._decided) if j >= first]
    earlier = [j for j in sorted(ea._decided) if j < first]
    assert len(later) == 100 and len(earlier) == 400
    assert np.abs(got[later] - np.stack([ea._decided[j] for j in later])).max() <= TOLERANCE
    assert np.abs(got[earlier] - np.stack([ea._decided[j] for j in earlier])).max() > 1e-3


def test_cli_refuses_then_exports_with_last_model(retrained, tmp_path, capsys, caplog):
    folder = tmp_path / "run"
    folder.mkdir()
    retrained.ea_instance.save_model(str(folder / "model"))
    with pytest.raises(SystemExit) as refused:
        main(["export", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()
    assert refused.value.code == 2 and len(err) == 1 and "--last-model" in err[0]
    assert not (folder / "model.onnx").exists()
    with caplog.at_level(logging.WARNING):
        main(["export", str(folder), "--last-model"])
    assert (folder / "model.onnx").exists() and "the last of FractalEA's 3 walk-forward models" in caplog.text


def test_a_retrained_forecast_ea_is_refused_and_its_last_model_forecasts_as_the_ea_from_then_on(
    candles, tmp_path
):
    ea = run_forecast(candles, model="patchtst", retrain_every=250).ea_instance
    assert ea.rounds == 2
    with pytest.raises(ExportError, match="ForecastEA was trained 2 times walk-forward"):
        export(ea, tmp_path)
    done = export(ea, tmp_path, last_model=True)
    first = candles.index.get_loc(pd.Timestamp(ea._study_span[-1][1])) + 1  # the first bar forecast from
    onnx_ea = Backtest(candles, OnnxEA, forward="1/3", seed=7).run(model=str(done.onnx_path)).ea_instance
    got = onnx_ea.signal.values.reshape(len(candles), 12, 1)[:, :, 0]  # the forecast made after each bar
    later = [(bar, path) for bar, path, *_ in ea._log if bar >= first]
    earlier = [(bar, path) for bar, path, *_ in ea._log if bar < first]
    assert len(later) == 250 and len(earlier) == 250
    diff = [np.abs(got[bar - 1] - path).max() for bar, path in later]
    assert max(diff) <= FORECAST_TOLERANCE * ea.scaler.std[0]
    assert max(np.abs(got[bar - 1] - path).max() for bar, path in earlier) > 1e-4
