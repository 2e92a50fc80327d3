"""Trained tiny Fractal EAs (numpy, seconds to train) shared by the export tests, on the sample's first 1,500
bars declared as a UTC+2 (US DST) server's, so the server clock is not UTC."""

from dataclasses import replace

import pytest
from test_export.export_support import run_fractal

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
