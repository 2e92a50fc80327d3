"""The check every export passes before anything is written: the graph, run by onnxruntime, against what the
Python side computes on the same rows.

The rows are synthetic and seeded (``PARITY_SEED``): bars of the model's symbol, timeframe, digits and server
clock (``datafeeds.synthetic``) for an EA, random-walk windows around the training rows' mean and deviation
for a CSV forecaster. The last window and the graph's outputs on it become the MQL5 EA's parity vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strategies.errors import ExportError
from strategies.export.build import Built, python_fractal, rates_windows
from strategies.export.forecaster import channel_windows, python_forecast
from strategies.export.source import ModelSource

TOLERANCE = 1e-5  # largest difference of a class probability between the graph and the Python EA
# Largest forecast difference, relative to each channel's scale: the standard deviation of the training rows
# (1e-4 of it is about 1e-6 of a EURUSD price; the graph stays near 1e-9, float32 erf in GELU its largest).
FORECAST_TOLERANCE = 1e-4
PARITY_SEED = 20240  # the synthetic rows of the check and of the parity vector
SYNTHETIC_WINDOWS = 201


@dataclass(frozen=True)
class Parity:
    """The check's figures and the parity vector: the last window and the graph's outputs on it."""

    window: np.ndarray  # (N, fields) one input window
    output: np.ndarray  # the graph's output on it, one window's shape
    difference: float  # the largest difference over every window compared
    windows: int


def forecast_difference(got: np.ndarray, want: np.ndarray, std: tuple[float, ...]) -> float:
    """The largest ``|got − want|`` of ``(M, T, C)`` forecasts, in each channel's training deviations."""
    return float((np.abs(got - want) / np.asarray(std)).max())


def _synthetic_bars(src: ModelSource, bars: int):
    from datafeeds.synthetic import synthetic_candles

    c = src.candles
    return synthetic_candles(c.symbol, c.timeframe, bars, seed=PARITY_SEED, clock=c.clock, digits=c.digits)


def fractal_parity(src: ModelSource, built: Built, session) -> Parity:
    """FractalEA: probabilities within ``TOLERANCE`` and the same class on every window."""
    frame = _synthetic_bars(src, built.bars + SYNTHETIC_WINDOWS - 1)
    rows, want = python_fractal(src, frame)
    keep = rows >= built.bars - 1
    windows = rates_windows(frame, src.candles.clock, built.bars, rows[keep])
    got = session.run([built.output], {"rates": windows})[0]
    diff = float(np.abs(got - want[keep]).max())
    if not diff <= TOLERANCE or (got.argmax(axis=1) != want[keep].argmax(axis=1)).any():
        raise ExportError(
            f"the exported graph differs from the Python EA by {diff:.2e} (tolerance {TOLERANCE})"
        )
    return Parity(windows[-1], got[-1], diff, len(windows))


def forecast_parity(src: ModelSource, built: Built, session) -> Parity:
    """A forecaster: forecasts within ``FORECAST_TOLERANCE`` of each channel's training deviation."""
    spec = src.forecast
    n = spec.seq_len
    if src.ea is not None:
        frame = _synthetic_bars(src, n + SYNTHETIC_WINDOWS - 1)
        ends = np.arange(n - 1, len(frame))
        given = rates_windows(frame, src.candles.clock, n, ends)
        raw = channel_windows(frame, spec.channels, n, ends)
        feed = {"rates": given}
    else:  # random walks that start within the training range, in its units
        rng = np.random.default_rng(PARITY_SEED)
        start = rng.normal(size=(SYNTHETIC_WINDOWS, 1, len(spec.channels)))
        walk = start + np.cumsum(
            rng.normal(scale=0.1, size=(SYNTHETIC_WINDOWS, n, len(spec.channels))), axis=1
        )
        given = raw = np.asarray(spec.mean) + np.asarray(spec.std) * walk
        feed = {"window": given}
    got = session.run([built.output], feed)[0]
    diff = forecast_difference(got, python_forecast(src, raw), spec.std)
    if not diff <= FORECAST_TOLERANCE:
        raise ExportError(
            f"the exported graph's forecasts differ from the Python model's by {diff:.2e} of the channels' "
            f"training deviation (tolerance {FORECAST_TOLERANCE})"
        )
    return Parity(given[-1], got[-1], diff, len(given))
