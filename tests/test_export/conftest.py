"""Trained tiny Fractal EAs and ForecastEAs (numpy, seconds to train) shared by the export tests, on the
sample's first 1,500 bars declared as a UTC+2 (US DST) server's, so the server clock is not UTC."""

from dataclasses import replace

import pytest
from test_export.export_support import run_forecast, run_fractal

from datafeeds import make_frame, meta_of, read_sample
from datafeeds.clock import BrokerClock

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session")
def candles():
    df = read_sample(spread=10).iloc[:1500]
    return make_frame(df, df.index, replace(meta_of(df), clock=BrokerClock(2.0, "us")))


@pytest.fixture(scope="session")
def dense_run(candles):
    return run_fractal(candles)


@pytest.fixture(scope="session")
def dense_model(dense_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dense")
    return dense_run.ea_instance.save_model(str(folder / "model"))


@pytest.fixture(scope="session")
def forecast_runs(candles):
    """ForecastEA on ATFNet (four channels, the close second) and on PatchTST (the close alone)."""
    return {
        "atfnet": run_forecast(candles, model="atfnet", channels="high,close,tick_volume,spread"),
        "patchtst": run_forecast(candles, model="patchtst", channels="close", horizon=5, cost_multiple=0.5),
    }


@pytest.fixture(scope="session")
def forecast_models(forecast_runs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("forecast")
    return {k: run.ea_instance.save_model(str(folder / k)) for k, run in forecast_runs.items()}
