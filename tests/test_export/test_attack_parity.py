"""The exported features against the Python EA's on the rows a terminal's ``CopyRates`` gives, for the
clocks, timeframes and data a broker really serves: another offset, the European DST rule, H4 and D1 bars,
missing bars, no spread, and bars whose typical prices are equal."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from test_export.export_support import copy_rates

from datafeeds import make_frame, meta_of
from datafeeds.clock import BrokerClock
from datafeeds.synthetic import synthetic_candles
from strategies.export.bar_graph import COLUMNS, fractal_features, window_bars
from strategies.export.graph import Graph
from strategies.features import FEATURES, bar_features, windows

DEPTH = 20
CALENDAR = slice(4, 7)  # hour, weekday (0 = Sunday), month


def _features_session():
    n = window_bars(DEPTH)
    g = Graph()
    out = g.rename(fractal_features(g, "rates", n, DEPTH), "features")
    h = onnx.helper
    model = g.model(
        [h.make_tensor_value_info("rates", onnx.TensorProto.DOUBLE, [None, n, len(COLUMNS)])],
        [h.make_tensor_value_info(out, onnx.TensorProto.DOUBLE, [None, DEPTH * len(FEATURES)])],
        {},
        "features",
    )
    return n, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _graph_and_python(frame) -> tuple[np.ndarray, np.ndarray]:
    """``(M, depth, 12)`` features of every bar with a full window: the graph's on CopyRates rows and the
    Python EA's on the whole history."""
    n, session = _features_session()
    cols = [frame[c].to_numpy(dtype=np.float64) for c in ("open", "high", "low", "close", "tick_volume")]
    x, rows = windows(bar_features(*cols, frame.index, meta_of(frame).clock), DEPTH)
    keep = rows >= n - 1
    got = session.run(None, {"rates": copy_rates(frame, n, rows[keep])})[0]
    return got.reshape(-1, DEPTH, len(FEATURES)), x[keep].reshape(-1, DEPTH, len(FEATURES))


def _dropped(frame, share: float, seed: int):
    keep = np.random.default_rng(seed).random(len(frame)) >= share
    return make_frame(frame[keep], frame.index[keep], meta_of(frame))


BROKERS = {
    "UTC+3 without DST, H1": lambda: synthetic_candles("EURUSD", "H1", 2000, seed=4, start="2023-09-25",
                                                       clock=BrokerClock(3.0)),
    "UTC+2 EU DST, M15 across the switch": lambda: synthetic_candles("USDJPY", "M15", 2000, seed=5,
                                                                     start="2023-10-20", clock=BrokerClock(2.0, "eu")),
    "UTC+2 US DST, H4 over two switches": lambda: synthetic_candles("EURUSD", "H4", 2000, seed=7,
                                                                    start="2022-01-03", clock=BrokerClock(2.0, "us")),
    "UTC+2 US DST, D1 over years": lambda: synthetic_candles("XAUUSD", "D1", 1200, seed=8, start="2015-01-01",
                                                             clock=BrokerClock(2.0, "us")),
    "UTC+5.5, H1": lambda: synthetic_candles("EURUSD", "H1", 1500, seed=6, start="2024-02-20",
                                             clock=BrokerClock(5.5)),
    "missing bars": lambda: _dropped(synthetic_candles("EURUSD", "H1", 2200, seed=9, start="2023-03-01",
                                                       clock=BrokerClock(2.0, "us")), 0.1, 0),
    "zero spread": lambda: synthetic_candles("EURUSD", "H1", 1500, seed=10, start="2023-03-01",
                                             clock=BrokerClock(2.0, "us"), spread=0),
}  # fmt: skip


@pytest.mark.parametrize("broker", sorted(BROKERS))
def test_the_graph_computes_the_python_features_on_every_bar(broker):
    got, want = _graph_and_python(BROKERS[broker]())
    np.testing.assert_array_equal(got[..., CALENDAR], want[..., CALENDAR])
    spread = want.std(axis=(0, 1))
    spread[CALENDAR] = 1.0
    assert (np.abs(got - want) / np.where(spread > 0, spread, 1.0)).max() < 1e-6


def test_cci_of_bars_with_equal_typical_prices_is_the_same_in_the_graph_and_in_python():
    """Forty bars of one shape (high +2 points, low −1): their typical prices are equal and CCI is 0; the
    float rounding of (h + l + c) / 3 made Python read −66.67 there and the graph 0 (or +66.67: opposite
    signs), a whole CCI spread between the model's inputs in Python and in the terminal."""
    frame = synthetic_candles("EURUSD", "H1", 600, seed=3, start="2023-02-20", clock=BrokerClock(2.0, "us"))
    for price in (1.10003, 0.98761):
        data = frame.copy()
        for col, value in (("open", price), ("high", price + 2e-5), ("low", price - 1e-5), ("close", price)):
            data.iloc[400:440, data.columns.get_loc(col)] = round(value, 5)
        got, want = _graph_and_python(make_frame(data, data.index, meta_of(frame)))
        cci = FEATURES.index("cci14")
        np.testing.assert_allclose(got[..., cci], want[..., cci], rtol=0, atol=1e-6)
