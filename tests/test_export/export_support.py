"""Helpers of the export tests: tiny Fractal EA and ForecastEA runs and the rows MQL5's CopyRates returns."""

import numpy as np
import pytest

from backtests import Backtest
from datafeeds import to_rates
from nn import load, save
from strategies import ForecastEA, FractalEA
from strategies.errors import ExportError
from strategies.export import export

TINY = {"hidden": "12", "epochs": 2, "backend": "numpy", "batch_size": 64, "validation": 0}


def copy_rates(df, n: int, ends) -> np.ndarray:
    """``(len(ends), n, 7)``: what MQL5's ``CopyRates(_Symbol, _Period, 1, n, rates)`` gives at the open of
    the bar after each of ``ends``: the n closed bars, oldest first, time in server seconds (from the
    terminal's own rates array, ``datafeeds.to_rates``)."""
    rates = to_rates(df)
    fields = ("time", "open", "high", "low", "close", "tick_volume", "spread")
    table = np.column_stack([rates[f].astype(np.float64) for f in fields])
    return np.stack([table[e - n + 1 : e + 1] for e in ends])


def run_fractal(candles, **params):
    return Backtest(candles, FractalEA, forward="1/3", seed=7).run(**{**TINY, **params})


FORECAST = {"seq_len": 48, "pred_len": 12, "d_model": 8, "n_heads": 2, "d_ff": 16, "epochs": 2,
            "batch_size": 64, "backend": "numpy", "dropout": 0.0}  # fmt: skip


def run_forecast(candles, **params):
    return Backtest(candles, ForecastEA, forward="1/3", seed=7).run(**{**FORECAST, **params})


def resaved(model_path, tmp_path, **changes):
    """The model re-saved with its metadata changed (a file whose header lies, checksums intact); a change
    to None drops the key."""
    model = load(model_path, backend="numpy")
    meta = {**model.metadata, **changes}
    for key, value in changes.items():
        if value is None:
            meta.pop(key)
    return save(model, tmp_path / "hostile.nnz", meta)


def refused(source, out, match, **options):
    """The export of ``source`` (with ``options``) fails with ``match`` and writes nothing into ``out``."""
    with pytest.raises(ExportError, match=match):
        export(source, out, **options)
    assert not out.exists() or not any(out.iterdir())
