"""The exported Fractal EA against the Python EA: every forward bar, the rows CopyRates would give."""

import json

import numpy as np
import onnxruntime as ort
from test_export.export_support import copy_rates, run_fractal

from backtests import Backtest
from datafeeds import read_sample
from strategies import OnnxEA
from strategies.export import TOLERANCE, export
from strategies.export.bar_graph import COLUMNS, fractal_features, window_bars
from strategies.export.graph import ALLOWED, OPSET, Graph
from strategies.features import bar_features, windows


def _decided(run) -> tuple[np.ndarray, np.ndarray]:
    """The bars the Python EA decided at and the probabilities it traded on."""
    decided = run.ea_instance._decided
    bars = np.array(sorted(decided))
    return bars, np.stack([decided[b] for b in bars])


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_every_forward_bar_gives_the_python_class_and_probabilities(
    dense_run, dense_model, candles, tmp_path
):
    done = export(dense_model, tmp_path)
    bars, want = _decided(dense_run)
    assert len(bars) == 500 and bars[0] >= done.bars - 1
    got = _session(done.onnx_path).run(None, {"rates": copy_rates(candles, done.bars, bars)})[0]
    assert (got.argmax(axis=1) == want.argmax(axis=1)).all()
    assert np.abs(got - want).max() <= TOLERANCE


def test_backtest_of_the_exported_model_gives_the_python_trades(dense_run, dense_model, candles, tmp_path):
    done = export(dense_model, tmp_path)
    onnx_run = Backtest(candles, OnnxEA, forward="1/3", seed=7).run(model=str(done.onnx_path))
    cols = ["type", "lots", "entry_bar", "exit_bar", "entry_price", "exit_price", "exit_reason", "net_profit"]
    assert len(dense_run.trades) > 20
    assert onnx_run.trades[cols].equals(dense_run.trades[cols])


def test_dbn_export_matches_the_python_dbn(candles, tmp_path):
    run = run_fractal(candles, model="dbn", dbn_layers="8", dbn_epochs=3, dbn_fine_tune=5)
    done = export(run.ea_instance.save_model(str(tmp_path / "model")), tmp_path)
    bars, want = _decided(run)
    got = _session(done.onnx_path).run(None, {"rates": copy_rates(candles, done.bars, bars)})[0]
    assert (got.argmax(axis=1) == want.argmax(axis=1)).all()
    assert np.abs(got - want).max() <= TOLERANCE


LAYERS = [
    {"type": "dense", "units": 16, "activation": "sigmoid"},
    {"type": "batchnorm"},
    {"type": "dense", "units": 12, "activation": {"kind": "lrelu", "alpha": 0.2}},
    {"type": "dropout", "rate": 0.2},
    {"type": "dense", "units": 10, "activation": "swish"},
    {"type": "dense", "units": 9, "activation": "softplus"},
    {"type": "dense", "units": 8, "activation": "gelu"},
    {"type": "dense", "units": 7, "activation": "relu"},
    {"type": "activation", "kind": "linear", "alpha": 0.5, "beta": 0.1},
    {"type": "dense", "units": 6, "activation": "tanh"},
    {"type": "dense", "units": 3, "activation": "softmax"},
]


def test_every_activation_batchnorm_and_dropout_export(candles, tmp_path):
    run = run_fractal(candles, layers=json.dumps(LAYERS), epochs=3)
    done = export(run.ea_instance.save_model(str(tmp_path / "model")), tmp_path)
    bars, want = _decided(run)
    got = _session(done.onnx_path).run(None, {"rates": copy_rates(candles, done.bars, bars)})[0]
    assert np.abs(got - want).max() <= TOLERANCE


def test_graph_uses_only_onnx_runtime_1_14_operators_at_opset_17(dense_model, tmp_path):
    import onnx

    model = onnx.load(str(export(dense_model, tmp_path).onnx_path))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", OPSET)] and OPSET == 17
    assert model.ir_version <= 8
    assert {n.op_type for n in model.graph.node} <= set(ALLOWED)
    record = json.loads({p.key: p.value for p in model.metadata_props}["neuronet"])
    assert record["bars"] == window_bars(20) == 314 and record["ea"] == "FractalEA"
    rule = {"threshold": 0.5, "lots": 0.1, "sl_points": 300.0, "tp_points": 600.0, "exit_bars": 12}
    assert record["rule"] == rule


def test_in_graph_indicators_settle_to_the_full_history_values():
    """Seeded at the window's first bar, iMACD's EMAs and iRSI's averages differ from the full-history
    values by the seed's weight (< 1e-7) times its distance; measured on the sample, in units of each
    feature's spread."""
    import onnx

    df = read_sample()
    n, depth = window_bars(20), 20
    g = Graph()
    out = g.rename(fractal_features(g, "rates", n, depth), "features")
    h = onnx.helper
    model = g.model(
        [h.make_tensor_value_info("rates", onnx.TensorProto.DOUBLE, [None, n, len(COLUMNS)])],
        [h.make_tensor_value_info(out, onnx.TensorProto.DOUBLE, [None, depth * 12])],
        {},
        "features",
    )
    full, rows = windows(bar_features(df.open, df.high, df.low, df.close, df.tick_volume, df.index), depth)
    ends = np.arange(n - 1, len(df), 7)
    got = _session_bytes(model.SerializeToString()).run(None, {"rates": copy_rates(df, n, ends)})[0]
    want = full[np.searchsorted(rows, ends)]
    scale = full.reshape(-1, depth, 12).std(axis=(0, 1))
    assert (np.abs(got - want).reshape(-1, depth, 12) / scale).max() < 1e-6
    calendar = slice(4, 7)  # hour, weekday, month: exact
    np.testing.assert_array_equal(
        got.reshape(-1, depth, 12)[..., calendar], want.reshape(-1, depth, 12)[..., calendar]
    )


def _session_bytes(data):
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])
