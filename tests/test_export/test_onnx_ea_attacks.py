"""OnnxEA on someone else's model whose declared output lies: one clear line naming the model, no trade."""

import numpy as np
import onnx
import pytest

from backtests import Backtest
from strategies import OnnxEA
from strategies.errors import EAError

DOUBLE, INT64 = onnx.TensorProto.DOUBLE, onnx.TensorProto.INT64


def _model(path, nodes, consts, out_type=DOUBLE):
    """A model reading ``rates (b, 10, 7)`` and declaring ``y (b, 3)``."""
    h = onnx.helper
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in consts.items()]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("rates", DOUBLE, ["b", 10, 7])],
                         [h.make_tensor_value_info("y", out_type, ["b", 3])], inits)  # fmt: skip
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)


def test_a_model_whose_output_ignores_the_batch_is_named(candles, tmp_path):
    """Declared ``(b, 3)``, it returns one row whatever the batch: numpy's "cannot reshape array of size 3"
    came out of OnnxEA's setup; now the line says what the model gave for how many windows."""
    h = onnx.helper
    nodes = [h.make_node("ReduceSum", ["rates", "first"], ["s"], keepdims=0),  # (10, 7)
             h.make_node("Slice", ["s", "zero", "three", "one"], ["cols"]),  # (10, 3)
             h.make_node("Slice", ["cols", "zero", "one", "zero"], ["y"])]  # (1, 3)  # fmt: skip
    path = _model(tmp_path / "one_row.onnx", nodes, {"first": [0], "zero": [0], "one": [1], "three": [3]})
    with pytest.raises(EAError, match=r"one_row.onnx: the model gave an output of shape \(1, 3\) for \d+ "):
        Backtest(candles, OnnxEA, forward="1/3").run(model=path)


def test_a_model_whose_output_is_not_a_float_is_refused(candles, tmp_path):
    """Probabilities or a forecast are real numbers: an int64 output (a label, say) traded nothing in
    silence."""
    h = onnx.helper
    nodes = [h.make_node("Cast", ["rates"], ["r"], to=INT64),
             h.make_node("ReduceSum", ["r", "bars"], ["s"], keepdims=0),
             h.make_node("Slice", ["s", "zero", "three", "one"], ["y"])]  # fmt: skip
    path = _model(
        tmp_path / "labels.onnx", nodes, {"bars": [1], "zero": [0], "one": [1], "three": [3]}, INT64
    )
    with pytest.raises(
        EAError, match=r"labels.onnx: the output is tensor\(int64\); OnnxEA reads double or float"
    ):
        Backtest(candles, OnnxEA, forward="1/3").run(model=path)
