"""Hostile and unsupported inputs of the export: one clear error each, and nothing written."""

import json
import zipfile

import onnx
import pytest
from test_export.export_support import refused, resaved, run_fractal

from nn import load, save
from nn.dbn import DBN
from strategies import FractalEA
from strategies.errors import ExportError
from strategies.export import _check_ops, export
from strategies.export.graph import Graph
from strategies.indicators import rsi


def test_a_model_file_of_another_kind_is_refused(tmp_path, dense_model):
    dbn = load(dense_model, backend="numpy")  # a bare network saved by nn.save, not by an EA
    refused(save(dbn, tmp_path / "net.nnz", {}), tmp_path / "out", "not a model saved by an expert advisor")
    csv = tmp_path / "EURUSD_H1.csv"
    csv.write_text("<DATE>\t<TIME>\t<OPEN>\n")
    refused(csv, tmp_path / "out", "not a zip file|corrupted")
    refused(tmp_path / "missing.nnz", tmp_path / "out", "no such file")
    refused(tmp_path, tmp_path / "out", "holds no model file")
    other = resaved(dense_model, tmp_path, ea="SmaCrossEA")
    refused(other, tmp_path / "out", "a model of 'SmaCrossEA'")
    assert DBN.model_kind == "dbn"


TINY_RULE = {"threshold": 0.5, "lots": 0.1, "sl_points": 300.0, "tp_points": 600.0, "exit_bars": 12}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"depth": 10**9}, "depth=1000000000 is not a whole number within 1..500"),
        ({"depth": "20"}, "depth='20'"),
        ({"scaler": {"mean": [0.0] * 240, "std": [-1.0] * 240}}, "scaler.std is not 240 positive"),
        ({"scaler": {"mean": [0.0] * 3, "std": [1.0] * 3}}, "scaler.mean is not 240"),
        ({"features": ["close-open"]}, "features/classes"),
        ({"candles": None}, "which symbol, timeframe and clock"),
        ({"candles": {"symbol": "EURUSD", "timeframe": "H7"}}, "which symbol, timeframe and clock"),
        ({"feature_definitions": None}, "before they followed MetaTrader"),
        ({"params": {"model": "lstm"}}, "neither 'dense' nor 'dbn'"),
        ({"depth": 19}, "scaler.mean is not 228"),
        ({"depth": 19, "scaler": {"mean": [0.0] * 228, "std": [1.0] * 228}}, "takes 240 inputs"),
        (
            {"candles": {"symbol": 'EURUSD"\n#import "evil.dll"', "timeframe": "H1"}},
            "not a MetaTrader symbol",
        ),
        ({"candles": {"symbol": "EURUSD", "timeframe": "H1", "digits": 10**6}}, "digits 1000000 is not"),
        (
            {"params": {"model": "dense", "threshold": "0.5"}},
            "threshold='0.5' is not a number within 0.0..1.0",
        ),
        ({"params": {**TINY_RULE, "lots": -1.0}}, "lots=-1.0 is not a number"),
        ({"params": {**TINY_RULE, "sl_points": 1e300}}, "sl_points=1e"),
        ({"params": {**TINY_RULE, "exit_bars": 1.5}}, "exit_bars=1.5 is not a whole number"),
        ({"params": {**TINY_RULE, "magic": "7;"}}, "magic='7;' is not a whole number"),
    ],
)
def test_a_hostile_or_stale_model_file_is_refused(dense_model, tmp_path, changes, match):
    refused(resaved(dense_model, tmp_path, **changes), tmp_path / "out", match)


def test_a_truncated_model_file_is_refused(dense_model, tmp_path):
    with open(dense_model, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.nnz"
    cut.write_bytes(data[: len(data) // 2])
    refused(cut, tmp_path / "out", "corrupted|truncated")
    assert zipfile.is_zipfile(dense_model)


def test_an_unsupported_layer_is_named(candles, tmp_path):
    layers = [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "layernorm"},
              {"type": "dense", "units": 3, "activation": "softmax"}]  # fmt: skip
    run = run_fractal(candles, layers=json.dumps(layers))
    refused(run.ea_instance.save_model(str(tmp_path / "m")), tmp_path / "out", r"layer 1 \(layernorm\)")


class TalibFractal(FractalEA):
    """A FractalEA with an input computed by a Python function (a TA-Lib one would look the same)."""

    def on_init(self):
        super().on_init()
        self.extra = self.indicator(lambda b: rsi(b.close, 7), "talib_rsi7")


def test_an_ea_with_a_python_only_indicator_is_refused(candles, tmp_path):
    from test_export.export_support import TINY

    from backtests import Backtest

    run = Backtest(candles, TalibFractal, forward="1/3", seed=7).run(**TINY)
    refused(run.ea_instance, tmp_path / "out", r"'talib_rsi7' through indicator\(\): computed in Python")
    saved = run.ea_instance.save_model(str(tmp_path / "model"))  # its model file names its class
    refused(saved, tmp_path / "out", "a model of 'TalibFractal'")


def test_a_trained_ea_exports_like_its_model_file(dense_run, tmp_path):
    done = export(dense_run.ea_instance, tmp_path, name="FractalEA_EURUSD_H1")
    assert done.onnx_path.name == "FractalEA_EURUSD_H1.onnx" and done.mq5_path.exists()


def test_a_graph_over_the_operator_limit_is_refused():
    g = Graph()
    x = g.op("Abs", "rates")
    info, double = onnx.helper.make_tensor_value_info, onnx.TensorProto.DOUBLE
    model = g.model([info("rates", double, [1])], [info(x, double, [1])], {}, "t")
    model.graph.node.append(onnx.helper.make_node("Loop", ["a", "b"], ["c"]))
    with pytest.raises(ExportError, match=r"outside ONNX Runtime 1\.14's opset 17: Loop"):
        _check_ops(model)
    with pytest.raises(ValueError, match="Scan is outside"):
        g.op("Scan", x)


def test_bad_names_and_targets_are_refused(dense_model, tmp_path):
    for name in ("../evil", "", ".hidden", "a/b", 'a".onnx" as uchar X[]\n#import "x', "a\\b", "tab\t"):
        with pytest.raises(ExportError, match="plain file name"):
            export(dense_model, tmp_path / "out", name=name)
    assert not (tmp_path / "out").exists()
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ExportError, match="is not a folder"):
        export(dense_model, target)
    with pytest.raises(ExportError, match=r"below: cannot write the export there \(Not a directory\)"):
        export(dense_model, target / "below")  # a folder that cannot be made: one line, not a traceback
    with pytest.raises(ExportError, match="an ONNX model already"):
        export(export(dense_model, tmp_path / "pair").onnx_path, tmp_path / "again")
