"""Hostile forecaster files and ONNX models: one clear error each, nothing written, nothing huge built."""

import json
import os
import zipfile

import numpy as np
import onnx
import pytest
from test_export.export_support import refused, resaved

from backtests import Backtest
from nn import load, save
from strategies import OnnxEA
from strategies.errors import EAError
from strategies.export import export

SCALER4 = {"mean": [1.0, 1.0, 1.0, 1.0], "std": [0.1, 0.1, 0.1, 0.1]}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"channels": ["high", "close", "real_volume", "spread"]}, r"CopyRates fields .* not 'real_volume'"),
        ({"channels": ["high", "open", "tick_volume", "spread"]}, "including close"),
        ({"channels": ["high", "close", "close", "spread"]}, "must be distinct"),
        ({"channels": "close"}, "channels is not a list of candle columns"),
        ({"channels": None}, "channels is not a list of candle columns"),
        ({"channels": ["high", "close", "spread"], "scaler": {"mean": [1.0] * 3, "std": [1.0] * 3}},
         r"the network maps \(48, 4\) windows to \(12, 4\); the metadata says \(48, 3\)"),
        ({"seq_len": 10**9}, "metadata seq_len is 1000000000, not a whole number within 1..2000"),
        ({"seq_len": 47}, r"the network maps \(48, 4\)"),
        ({"pred_len": 13}, r"the network maps \(48, 4\) windows to \(12, 4\)"),
        ({"pred_len": "12"}, "metadata pred_len is '12'"),
        ({"horizon": 13}, r"metadata horizon is 13, not a whole number within 1\.\.12"),
        ({"horizon": True}, "metadata horizon is True"),
        ({"scaler": {"mean": [1.0] * 4, "std": [0.1, 0.0, 0.1, 0.1]}}, "scaler std is not 4 positive finite"),
        ({"scaler": {"mean": ["x"] * 4, "std": [0.1] * 4}}, "scaler mean is not 4 finite"),
        ({"scaler": None}, "scaler mean is not 4 finite"),
        ({"candles": None}, "which symbol, timeframe and clock"),
        ({"training_rounds": "3"}, "training_rounds/study_periods do not describe the training"),
        ({"training_rounds": 2}, "training_rounds/study_periods do not describe the training"),
        ({"params": None}, "metadata has no EA parameters"),
    ],
)  # fmt: skip
def test_a_forecaster_whose_metadata_lies_is_refused(forecast_models, tmp_path, changes, match):
    refused(resaved(forecast_models["atfnet"], tmp_path, **changes), tmp_path / "out", match)


def test_a_csv_forecaster_whose_metadata_lies_is_refused(forecast_models, tmp_path):
    net = load(forecast_models["patchtst"], backend="numpy")
    meta = {"channels": ["OT"], "target": "OT", "seq_len": 48, "pred_len": 12, "scaler_mean": [1.0],
            "scaler_std": [0.1]}  # fmt: skip
    csv = save(net, tmp_path / "csv.nnz", meta)
    assert export(csv, tmp_path / "ok").mq5_path is None  # the honest file exports
    for changes, match in (
        ({"scaler_std": [0.1, 0.1]}, "scaler std is not 1 positive finite"),
        ({"channels": ["OT", "HUFL"], "scaler_mean": [1.0, 2.0], "scaler_std": [0.1, 0.2]},
         r"the network maps \(48, 1\)"),
        ({"channels": [1]}, "channels is not a list of 1..1000 column names"),
        ({"seq_len": 0}, "metadata seq_len is 0"),
    ):  # fmt: skip
        refused(resaved(csv, tmp_path, **changes), tmp_path / "out", match)


def test_a_truncated_forecaster_file_is_refused(forecast_models, tmp_path):
    with open(forecast_models["atfnet"], "rb") as f:
        data = f.read()
    for size in (len(data) // 2, 100, 0):
        cut = tmp_path / f"cut{size}.nnz"
        cut.write_bytes(data[:size])
        refused(cut, tmp_path / "out", "corrupted|truncated|not a zip")


def _edited(path, tmp_path, edit):
    """The file with its header.json edited (the arrays and their checksums intact)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    header = json.loads(members["header.json"])
    edit(header)
    members["header.json"] = json.dumps(header).encode()
    out = tmp_path / "edited.nnz"
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


def _layer(key, value):
    return lambda h: h["architecture"]["layers"][0].__setitem__(key, value)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda h: h["architecture"].__setitem__("input_shape", [10**7, 4]),
         r"input window \(atfnet input_shape\[0\]\) is 10000000, not a whole number within 1\.\.2000"),
        (lambda h: h["architecture"].__setitem__("input_shape", [48, 10**6]),
         r"input channels \(atfnet input_shape\[1\]\) is 1000000"),
        (lambda h: h["architecture"].__setitem__("input_shape", 48), r"input_shape 48 is not \(window, chan"),
        (_layer("pred_len", 10**8), r"horizon \(atfnet pred_len\) is 100000000"),
        (_layer("d_model", 10**6), "the network's d_model is 1000000"),
        (_layer("fnet_layers", 10**4), "the network's fnet_layers is 10000"),
        (_layer("n_heads", -2), "the network's n_heads is -2"),
    ],
)  # fmt: skip
def test_huge_declared_sizes_are_refused_before_the_model_is_built(forecast_models, tmp_path, edit, match):
    """The DFT bases alone of a 10^7-point window would take 10^14 numbers: refused from the header."""
    refused(_edited(forecast_models["atfnet"], tmp_path, edit), tmp_path / "out", match)


def test_a_layer_without_an_onnx_form_is_named(forecast_models, dense_model, tmp_path):
    holomorphic = _edited(forecast_models["atfnet"], tmp_path, _layer("score", "holomorphic"))
    refused(holomorphic, tmp_path / "out", "complex attention score 'holomorphic' has no ONNX export")
    forecast_meta = load(forecast_models["patchtst"], backend="numpy").metadata
    dense = save(load(dense_model, backend="numpy"), tmp_path / "dense.nnz", forecast_meta)
    refused(dense, tmp_path / "out", "a forecaster's network is one ATFNet or PatchTST layer")


def test_a_pipe_or_device_is_not_read(tmp_path):
    fifo = tmp_path / "model.nnz"
    os.mkfifo(fifo)
    refused(fifo, tmp_path / "out", "not a regular file")  # no hang waiting for a writer
    refused("/dev/zero", tmp_path / "out", "not a regular file")


def test_onnx_ea_refuses_a_hostile_neuronet_record(forecast_models, candles, tmp_path):
    done = export(forecast_models["patchtst"], tmp_path)
    model = onnx.load(str(done.onnx_path))
    for value, match in (("{not json", "neuronet metadata is not JSON"),
                         (json.dumps({"rule": {"step": 0}}), r"horizon must be within 1\.\.12"),
                         (json.dumps({"close": 3}), r"1 channels; say which is the close")):  # fmt: skip
        del model.metadata_props[:]
        entry = model.metadata_props.add()
        entry.key, entry.value = "neuronet", value
        path = tmp_path / "hostile.onnx"
        onnx.save(model, str(path))
        with pytest.raises(EAError, match=match):
            Backtest(candles, OnnxEA, forward="1/3").run(model=str(path))


def test_a_forecaster_whose_rule_or_symbol_would_break_the_mql5_source_is_refused(forecast_models, tmp_path):
    meta = load(forecast_models["patchtst"], backend="numpy").metadata
    params, candles = meta["params"], meta["candles"]
    for changes, match in (
        ({"params": {**params, "cost_multiple": -1.0}}, "cost_multiple=-1.0 is not a number within"),
        ({"params": {**params, "lots": "0.1"}}, "lots='0.1' is not a number"),
        ({"params": {**params, "magic": 1.5}}, "magic=1.5 is not a whole number"),
        ({"candles": {**candles, "symbol": "EURUSD\\"}}, "is not a MetaTrader symbol name"),
        ({"candles": {**candles, "symbol": ""}}, "is not a MetaTrader symbol name"),
    ):
        refused(resaved(forecast_models["patchtst"], tmp_path, **changes), tmp_path / "out", match)


def test_onnx_ea_refuses_a_model_declaring_huge_outputs(candles, tmp_path):
    h = onnx.helper
    for bars, out, match in ((48, [1000, 1000], "1000000 values out"), (0, [12, 1], "0 bars in")):
        consts = [onnx.numpy_helper.from_array(np.array(v, np.int64), n)
                  for n, v in (("axes", [1, 2]), ("shape", [1, *out]))]  # fmt: skip
        nodes = [h.make_node("ReduceSum", ["rates", "axes"], ["s"], keepdims=1),
                 h.make_node("Expand", ["s", "shape"], ["y"])]  # fmt: skip
        graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("rates", 11, ["b", bars, 7])],
                             [h.make_tensor_value_info("y", 11, ["b", *out])], consts)  # fmt: skip
        path = tmp_path / "huge.onnx"
        onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8), str(path))
        with pytest.raises(EAError, match=match):
            Backtest(candles, OnnxEA, forward="1/3").run(model=str(path))
