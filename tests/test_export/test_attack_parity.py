"""The exported features against the Python EA's on the rows a terminal's ``CopyRates`` gives, for the
clocks, timeframes and data a broker really serves: another offset, the European DST rule, H4 and D1 bars,
missing bars, no spread, and bars whose typical prices are equal."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from test_export.export_support import copy_rates, run_fractal

from backtests import Backtest
from datafeeds import make_frame, meta_of
from datafeeds.clock import BrokerClock
from datafeeds.synthetic import synthetic_candles
from strategies import OnnxEA
from strategies.export import export
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


US, EU = BrokerClock(2.0, "us"), BrokerClock(2.0, "eu")
BROKERS = {  # symbol, timeframe, bars, start, clock, share of bars missing, spread
    "UTC+3 without DST, H1": ("EURUSD", "H1", 2000, "2023-09-25", BrokerClock(3.0), 0.0, None),
    "UTC+2 EU DST, M15 across the switch": ("USDJPY", "M15", 2000, "2023-10-20", EU, 0.0, None),
    "UTC+2 US DST, H4 over two switches": ("EURUSD", "H4", 2000, "2022-01-03", US, 0.0, None),
    "UTC+2 US DST, D1 over years": ("XAUUSD", "D1", 1200, "2015-01-01", US, 0.0, None),
    "UTC+5.5, H1": ("EURUSD", "H1", 1500, "2024-02-20", BrokerClock(5.5), 0.0, None),
    "missing bars": ("EURUSD", "H1", 2200, "2023-03-01", US, 0.1, None),
    "zero spread": ("EURUSD", "H1", 1500, "2023-03-01", US, 0.0, 0),
}


def _broker(name: str):
    symbol, timeframe, bars, start, clock, missing, spread = BROKERS[name]
    frame = synthetic_candles(
        symbol, timeframe, bars, seed=len(name), start=start, clock=clock, spread=spread
    )
    keep = np.random.default_rng(0).random(len(frame)) >= missing
    return make_frame(frame[keep], frame.index[keep], meta_of(frame))


@pytest.mark.parametrize("broker", sorted(BROKERS))
def test_the_graph_computes_the_python_features_on_every_bar(broker):
    got, want = _graph_and_python(_broker(broker))
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


def test_the_graphs_rsi_is_within_1e_7_relative_of_the_full_history_rsi():
    got, want = _graph_and_python(_broker("UTC+3 without DST, H1"))
    rsi = FEATURES.index("rsi14")
    assert (np.abs(got[..., rsi] - want[..., rsi]) / np.abs(want[..., rsi])).max() < 1e-7


def test_onnx_ea_gives_the_python_trades_on_a_utc_plus_3_server_with_missing_bars(tmp_path):
    """A tenth of the bars missing (as a broker's history has gaps) on a server clock of UTC+3: the
    backtest of the exported model trades exactly as the Python EA did."""
    frame = synthetic_candles("EURUSD", "H1", 3300, seed=9, start="2023-02-20", clock=BrokerClock(3.0))
    keep = np.random.default_rng(0).random(len(frame)) >= 0.1
    frame = make_frame(frame[keep], frame.index[keep], meta_of(frame))
    run = run_fractal(frame, epochs=20, hidden="32", threshold=0.4)
    done = export(run.ea_instance.save_model(str(tmp_path / "model")), tmp_path)
    onnx_run = Backtest(frame, OnnxEA, forward="1/3", seed=7).run(model=str(done.onnx_path))
    cols = ["type", "lots", "entry_bar", "exit_bar", "entry_price", "exit_price", "exit_reason", "net_profit"]
    assert len(run.trades) > 20
    assert onnx_run.trades[cols].equals(run.trades[cols])
