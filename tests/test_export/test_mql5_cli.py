"""The generated MQL5 Expert Advisors' text, the ``neuronet export`` command and OnnxEA's refusals."""

import re
from importlib import resources

import numpy as np
import onnxruntime as ort
import pytest

from neuronet.cli import main
from strategies import OnnxEA
from strategies.errors import EAError
from strategies.export import FORECAST_TOLERANCE, TOLERANCE, export
from strategies.export.mql5 import MARKER, TEMPLATES


def _array(text: str, name: str) -> np.ndarray:
    body = re.search(rf"const double {name}\[(\d+)\] = \{{(.*?)\}};", text, re.S)
    values = np.array([float(v) for v in body.group(2).replace("\n", " ").split(",")])
    assert len(values) == int(body.group(1))
    return values


def test_the_expert_advisor_embeds_shapes_constants_and_the_models_parity_vector(dense_model, tmp_path):
    done = export(dense_model, tmp_path, name="FractalEA_EURUSD_H1")
    text = done.mq5_path.read_text(encoding="utf-8")
    for line in (
        '#resource "FractalEA_EURUSD_H1.onnx" as uchar ExtModel[]',
        "#define NN_BARS 314",
        "#define NN_FIELDS 7",
        "#define NN_OUTPUTS 3",
        '#define NN_SYMBOL "EURUSD"',
        "#define NN_PERIOD PERIOD_H1",
        f"#define NN_TOLERANCE {TOLERANCE!r}",
        "input double InpLots      = 0.1;",
        "input double InpThreshold = 0.5;",
        "input int    InpSLPoints  = 300;",
        "input int    InpTPPoints  = 600;",
        "input int    InpExitBars  = 12;",
        "const long input_shape[] = {1, NN_BARS, NN_FIELDS};",
        "if(CopyRates(_Symbol, _Period, 1, NN_BARS, rates) != NN_BARS)",
    ):
        assert line in text, line
    assert "OnnxSetInputShape" in text and "return(INIT_FAILED);" in text.split("parity check failed")[1]
    window = _array(text, "NN_PARITY_RATES").reshape(314, 7)
    expected = _array(text, "NN_PARITY_OUTPUT")
    session = ort.InferenceSession(str(done.onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"rates": window[None]})[0][0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-7)
    _static(text, "FractalEA")


def _static(text: str, ea: str) -> None:
    """Only the constants block differs from the EA's template, and it holds only constants."""
    template = resources.files("strategies.export").joinpath(TEMPLATES[ea]).read_text(encoding="utf-8")
    head, tail = template.split(MARKER)
    assert text.startswith(head) and text.endswith(tail)
    constants = text[len(head) : len(text) - len(tail)]
    assert all(line.startswith(("#resource", "#define", "input ", "const double", "   ")) or not line
               for line in constants.splitlines())  # fmt: skip


def test_the_forecast_expert_advisor_embeds_shapes_rule_and_the_models_parity_vector(
    forecast_runs, forecast_models, tmp_path
):
    ea = forecast_runs["atfnet"].ea_instance
    done = export(forecast_models["atfnet"], tmp_path, name="ForecastEA_EURUSD_H1")
    text = done.mq5_path.read_text(encoding="utf-8")
    for line in (
        '#resource "ForecastEA_EURUSD_H1.onnx" as uchar ExtModel[]',
        "#define NN_BARS 48",
        "#define NN_FIELDS 7",
        "#define NN_STEPS 12",
        "#define NN_CHANNELS 4",
        "#define NN_CLOSE 1  // the close among the channels: high, close, tick_volume, spread",
        '#define NN_SYMBOL "EURUSD"',
        "#define NN_PERIOD PERIOD_H1",
        f"#define NN_TOLERANCE {FORECAST_TOLERANCE!r}",
        "input double InpLots         = 0.1;",
        "input double InpCostMultiple = 1.0;",
        "input int    InpHorizon      = 12;",
        "const long output_shape[] = {1, NN_STEPS, NN_CHANNELS};",
        "if(CopyRates(_Symbol, _Period, 1, NN_BARS, rates) != NN_BARS)",
        "double move = y[InpHorizon - 1][NN_CLOSE] - rates[NN_BARS - 1].close;",
        "double threshold = InpCostMultiple * rates[NN_BARS - 1].spread * _Point;",
    ):
        assert line in text, line
    assert "return(INIT_FAILED);" in text.split("parity check failed")[1]
    np.testing.assert_array_equal(_array(text, "NN_SCALE"), ea.scaler.std)
    window = _array(text, "NN_PARITY_RATES").reshape(48, 7)
    expected = _array(text, "NN_PARITY_OUTPUT").reshape(12, 4)
    session = ort.InferenceSession(str(done.onnx_path), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"rates": window[None]})[0][0], expected)
    _static(text, "ForecastEA")


def test_cli_export_writes_the_pair_and_refuses_in_one_line(dense_model, tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    with open(dense_model, "rb") as f:
        (folder / "model.nnz").write_bytes(f.read())
    main(["export", str(folder), "--name", "fractal"])
    assert (folder / "fractal.onnx").exists() and (folder / "fractal.mq5").exists()
    assert "largest probability difference" in capsys.readouterr().out
    bad = tmp_path / "bad"
    with pytest.raises(SystemExit) as refused:
        main(["export", str(tmp_path / "nothing.nnz"), "--out", str(bad)])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "no such file" in err[0] and not bad.exists()


def test_export_help_shows_the_last_model_flag_without_a_value(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    main(["export", "--help"])
    out = capsys.readouterr().out
    assert "--last-model" in out and "<bool>" not in out


def test_onnx_ea_refuses_what_it_cannot_run(tmp_path, candles):
    from backtests import Backtest

    with pytest.raises(EAError, match="is not a file"):
        Backtest(candles, OnnxEA, forward="1/3").run(model=str(tmp_path / "missing.onnx"))
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not a model")
    with pytest.raises(EAError, match="cannot load it as an ONNX model"):
        Backtest(candles, OnnxEA, forward="1/3").run(model=str(junk))


def test_onnx_ea_refuses_a_model_of_another_contract(tmp_path, candles):
    import onnx

    from backtests import Backtest

    h = onnx.helper
    graph = h.make_graph([h.make_node("Abs", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])])  # fmt: skip
    path = tmp_path / "other.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), str(path))
    with pytest.raises(EAError, match=r"one input \(batch, N, 7\) of CopyRates rows"):
        Backtest(candles, OnnxEA, forward="1/3").run(model=str(path))
