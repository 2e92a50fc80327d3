"""The exported forecasters (ForecastEA on ATFNet and PatchTST, a CSV forecaster of neuronet forecast) against
the Python models: every forward window, fed the rows CopyRates would give; the backtest's trades."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from test_export.export_support import copy_rates

from backtests import Backtest
from neuronet.cli import main
from nn import load
from strategies import OnnxEA
from strategies.errors import ExportError
from strategies.export import FORECAST_TOLERANCE, _check_ops, export
from strategies.export.graph import ALLOWED, FLOAT_ONLY, OPSET, Graph
from strategies.features import Scaler

MODELS = ["atfnet", "patchtst"]
TRADE_COLUMNS = ["type", "lots", "entry_bar", "exit_bar", "entry_price", "exit_price", "exit_reason",
                 "net_profit"]  # fmt: skip


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _record(path) -> dict:
    return json.loads({p.key: p.value for p in onnx.load(str(path)).metadata_props}["neuronet"])


@pytest.mark.parametrize("model", MODELS)
def test_every_forward_window_gives_the_python_forecast(forecast_runs, forecast_models, candles, model,
                                                        tmp_path):  # fmt: skip
    ea = forecast_runs[model].ea_instance
    done = export(forecast_models[model], tmp_path)
    bars = np.array([bar for bar, *_ in ea._log])  # forecasts made at these bars' opens
    want = np.stack([path for _, path, *_ in ea._log])  # (M, T): the close forecast ForecastEA traded on
    assert len(bars) == 500 and done.bars == ea.seq_len == 48
    got = _session(done.onnx_path).run(None, {"rates": copy_rates(candles, done.bars, bars - 1)})[0]
    got = got[:, :, ea._cols.index("close")]
    assert np.abs(got - want).max() <= FORECAST_TOLERANCE * np.abs(want).min()  # relative to the price
    assert np.abs(got - want).max() <= FORECAST_TOLERANCE * ea.scaler.std[ea._close]  # and to its deviation
    assert done.max_difference <= FORECAST_TOLERANCE and done.windows_checked == 201


@pytest.mark.parametrize("model", MODELS)
def test_backtest_of_the_exported_forecaster_gives_the_python_trades(forecast_runs, forecast_models, candles,
                                                                     model, tmp_path):  # fmt: skip
    done = export(forecast_models[model], tmp_path)
    onnx_run = Backtest(candles, OnnxEA, forward="1/3", seed=7).run(model=str(done.onnx_path))
    python = forecast_runs[model].trades
    assert len(python) > 10
    assert onnx_run.trades[TRADE_COLUMNS].equals(python[TRADE_COLUMNS])


def test_someone_elses_forecaster_without_metadata_trades_with_the_rule_given(forecast_runs, forecast_models,
                                                                              candles, tmp_path):  # fmt: skip
    """A model without neuronet's metadata: OnnxEA needs the close channel of a multi-channel forecast, then
    trades ForecastEA's rule with the step, lots and cost multiple it is given."""
    from strategies.errors import EAError

    done = export(forecast_models["atfnet"], tmp_path)
    bare = onnx.load(str(done.onnx_path))
    del bare.metadata_props[:]
    path = tmp_path / "bare.onnx"
    onnx.save(bare, str(path))
    with pytest.raises(EAError, match=r"4 channels; say which is the close with -p close_channel=0\.\.3"):
        Backtest(candles, OnnxEA, forward="1/3", seed=7).run(model=str(path))
    with pytest.raises(EAError, match="threshold, exit_bars do not apply"):
        Backtest(candles, OnnxEA, forward="1/3").run(model=str(path), threshold=0.6, exit_bars=3)
    with pytest.raises(EAError, match=r"horizon must be within 1\.\.12"):
        Backtest(candles, OnnxEA, forward="1/3").run(model=str(path), close_channel=1, horizon=13)
    run = Backtest(candles, OnnxEA, forward="1/3", seed=7).run(model=str(path), close_channel=1)  # defaults
    assert run.trades[TRADE_COLUMNS].equals(forecast_runs["atfnet"].trades[TRADE_COLUMNS])


def test_a_class_model_refuses_the_forecast_options(dense_model, candles, tmp_path):
    from strategies.errors import EAError

    done = export(dense_model, tmp_path)
    with pytest.raises(EAError, match="gives class probabilities; OnnxEA cost_multiple do not apply"):
        Backtest(candles, OnnxEA, forward="1/3").run(model=str(done.onnx_path), cost_multiple=2.0)


@pytest.mark.parametrize("model", MODELS)
def test_graph_opset_operators_and_metadata(forecast_runs, forecast_models, model, tmp_path):
    ea = forecast_runs[model].ea_instance
    done = export(forecast_models[model], tmp_path)
    graph = onnx.load(str(done.onnx_path))
    assert [(o.domain, o.version) for o in graph.opset_import] == [("", OPSET)] and graph.ir_version <= 8
    ops = {n.op_type for n in graph.graph.node}
    assert ops <= set(ALLOWED) and ("Erf" in ops) and ({"Softplus", "Cos"} & ops == set())
    record = _record(done.onnx_path)
    assert record["ea"] == "ForecastEA" and record["model"] == model and record["bars"] == 48
    assert record["channels"] == ea._cols and record["close"] == ea._cols.index("close")
    assert record["rule"] == {"lots": 0.1, "cost_multiple": ea.cost_multiple, "step": ea._step}
    assert record["scaler"] == ea.scaler.to_dict() and record["training"]["rounds"] == 1
    assert [i.name for i in graph.graph.input] == ["rates"] and [o.name for o in graph.graph.output] == [
        "forecast"
    ]


def test_a_float_only_operator_on_float64_is_refused():
    g = Graph()
    y = g.op("Erf", "x")
    info, double = onnx.helper.make_tensor_value_info, onnx.TensorProto.DOUBLE
    model = g.model([info("x", double, [2])], [info(y, double, [2])], {}, "t")
    with pytest.raises(ExportError, match="runs Erf on other than float32"):
        _check_ops(model)
    assert {"Erf", "Softplus", "Cos"} == FLOAT_ONLY


def _csv(path, rows=700, seed=3):
    """A synthetic forecasting CSV: three channels with cycles, trends and noise, in very different units."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    frame = pd.DataFrame({
        "date": pd.date_range("2020-01-01", periods=rows, freq="h").strftime("%Y-%m-%d %H:%M:%S"),
        "load": 500 + 80 * np.sin(2 * np.pi * t / 24) + np.cumsum(rng.normal(0, 5, rows)),
        "temp": 12 + 6 * np.sin(2 * np.pi * t / 168) + rng.normal(0, 0.5, rows),
        "OT": 0.01 * np.cumsum(rng.normal(0, 1, rows)) + 0.002 * np.sin(2 * np.pi * t / 12),
    })  # fmt: skip
    frame.to_csv(path, index=False)
    return frame


@pytest.mark.parametrize("model", MODELS)
def test_a_csv_forecaster_exports_on_its_raw_channel_window(tmp_path, capsys, model):
    frame = _csv(tmp_path / "data.csv")
    out = tmp_path / "run"
    main(["forecast", "--csv", str(tmp_path / "data.csv"), "--target", "OT", "--seq-len", "36",
          "--pred-len", "10", "--epochs", "1", "--batch-size", "32", "--d-model", "8", "--n-heads", "2",
          "--d-ff", "16", "--layers", "1", "--model", model, "--backend", "numpy", "--out", str(out),
          "--no-progress"])  # fmt: skip
    capsys.readouterr()
    main(["export", str(out), "--name", "load_forecast"])
    printed = capsys.readouterr().out
    assert f"wrote {out / 'load_forecast.onnx'}\n" in printed and "forecast difference" in printed
    assert not (out / "load_forecast.mq5").exists()  # no trading rule, no Expert Advisor
    net = load(out / "model.nnz", backend="numpy")
    record = _record(out / "load_forecast.onnx")
    assert record["channels"] == ["load", "temp", "OT"] and record["target"] == "OT" and record["ea"] is None
    values = frame[["load", "temp", "OT"]].to_numpy()
    ends = np.arange(35, len(values))  # every window of the file
    windows = values[ends[:, None] - np.arange(35, -1, -1)[None, :]]  # (M, 36, 3), oldest first
    scaler = Scaler(tuple(net.metadata["scaler_mean"]), tuple(net.metadata["scaler_std"]))
    want = scaler.inverse(net.predict(scaler.transform(windows)))
    session = _session(out / "load_forecast.onnx")
    assert [i.name for i in session.get_inputs()] == ["window"]
    got = session.run(None, {"window": windows})[0]
    assert got.shape == (len(windows), 10, 3)
    assert (np.abs(got - want) / np.asarray(scaler.std)).max() <= FORECAST_TOLERANCE
    older = tmp_path / "older"  # before model.nnz, neuronet forecast --out named the file "model"
    older.mkdir()
    (older / "model").write_bytes((out / "model.nnz").read_bytes())
    assert export(older).onnx_path == older / "model.onnx"


def test_the_readme_lists_the_operator_set():
    """The README's operator list is ``ALLOWED``, the one table every export is checked against."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    listed = text.split("kernels take float32 only): ")[1].split(". Every export")[0]
    assert [op.strip() for op in listed.replace("\n", " ").split(",")] == sorted(ALLOWED)
    assert "opset 17" in text and OPSET == 17
