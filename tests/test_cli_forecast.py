"""``neuronet forecast`` on a small CSV written to disk: the protocol, the outputs and the error messages."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from nn.io import load
from strategies.forecast_data import read_series, split_spans
from strategies.forecasting import Preset, preset_for, run_protocol

TINY = Preset(d_model=4, n_heads=2, layers=1, d_ff=8, dropout=0.0, lr=1e-3, batch_size=64)


def run_forecast(csv, target, *, sizes=None, lr=1e-3, batch_size=64, **kw):
    preset = Preset(**{**TINY.__dict__, "lr": lr, "batch_size": batch_size})
    return run_protocol(csv, target, preset=preset, sizes=sizes, **kw)[0]


@pytest.fixture
def csv_path(tmp_path):
    n = 400
    t = np.arange(n)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "date": pd.date_range("2021-01-01", periods=n, freq="h").astype(str),
            "HUFL": np.sin(2 * np.pi * t / 24) + 0.1 * rng.normal(size=n),
            "LULL": np.cumsum(rng.normal(size=n)) * 0.1,
            "OT": 5 + np.sin(2 * np.pi * t / 12) + 0.1 * rng.normal(size=n),
        }
    )
    path = tmp_path / "series.csv"
    frame.to_csv(path, index=False)
    return path


def _naive_mse_by_hand(path, seq_len, pred_len, column):
    """The protocol written out independently: 70/10/20 rows, train-only scaling, last-value forecast."""
    values = pd.read_csv(path)[column].to_numpy()
    n = len(values)
    n_train, n_test = int(n * 0.7), int(n * 0.2)
    z = (values - values[:n_train].mean()) / values[:n_train].std()
    errs = []
    for s in range(n - n_test - seq_len, n - seq_len - pred_len + 1):
        errs.append((z[s + seq_len : s + seq_len + pred_len] - z[s + seq_len - 1]) ** 2)
    return float(np.mean(errs))


def test_cli_end_to_end_in_a_subprocess(csv_path, tmp_path):
    out = tmp_path / "result"
    cmd = [sys.executable, "-m", "neuronet", "forecast", "--csv", str(csv_path), "--target", "OT",
           "--seq-len", "24", "--pred-len", "8", "--epochs", "2", "--batch-size", "32", "--d-model", "4",
           "--n-heads", "2", "--layers", "1", "--d-ff", "8", "--backend", "numpy", "--lr", "1e-3",
           "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "naive MSE" in proc.stdout and "direction accuracy" in proc.stdout
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["channels"] == ["HUFL", "LULL", "OT"] and doc["windows"]["test"] == 80 - 8 + 1
    assert set(doc["mse"]) == {"atfnet", "naive", "linear"}
    assert all(np.isfinite(v) for v in doc["mse"].values())
    model = load(out / "model.nnz", backend="numpy")
    assert model.metadata["channels"] == doc["channels"] and len(model.metadata["scaler_mean"]) == 3
    lines = (out / "per_horizon.csv").read_text().splitlines()
    assert lines[0].startswith("step,atfnet_mse") and len(lines) == 9
    # M: the naive score is the mean over all three channels of the by-hand protocol
    want = np.mean([_naive_mse_by_hand(csv_path, 24, 8, c) for c in ("HUFL", "LULL", "OT")])
    assert doc["mse"]["naive"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("features", ["S", "MS"])
def test_single_target_scoring(features, csv_path):
    doc = run_forecast(csv_path, "OT", features=features, seq_len=24, pred_len=8, model="patchtst", epochs=1,
                       batch_size=64, backend="numpy")  # fmt: skip
    assert doc["channels"][-1] == "OT" and len(doc["channels"]) == (1 if features == "S" else 3)
    assert doc["mse"]["naive"] == pytest.approx(_naive_mse_by_hand(csv_path, 24, 8, "OT"), rel=1e-9)
    assert len(doc["per_step"]["patchtst"]["mae"]) == 8


def test_training_improves_on_a_periodic_series(csv_path):
    doc = run_forecast(csv_path, "OT", features="S", seq_len=24, pred_len=8, epochs=6, batch_size=16, lr=3e-3,
                       patience=6, backend="numpy", sizes=dict(d_model=8, d_ff=16, fnet_d_model=8,
                       fnet_d_ff=16, fnet_layers=1))  # fmt: skip
    assert doc["epochs"][-1]["loss"] < doc["epochs"][0]["loss"]
    assert doc["mse"]["atfnet"] < doc["mse"]["naive"]  # a 12-point sine: repeating the last value is poor


def _error(argv, capsys):
    """Run the command line; a user error is one line on stderr with exit status 2: return that line."""
    from neuronet.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["forecast", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_errors_name_the_problem(csv_path, tmp_path, capsys):
    base = ["--seq-len", "24", "--pred-len", "8", "--backend", "numpy"]
    nodate = tmp_path / "nodate.csv"
    pd.read_csv(csv_path).rename(columns={"date": "when"}).to_csv(nodate, index=False)
    assert "no 'date' column" in _error(["--csv", str(nodate), "--target", "OT", *base], capsys)
    text = tmp_path / "text.csv"
    frame = pd.read_csv(csv_path)
    frame["LULL"] = frame["LULL"].astype(object)
    frame.loc[5, "LULL"] = "1.2.3"
    frame.to_csv(text, index=False)
    err = _error(["--csv", str(text), "--target", "OT", *base], capsys)
    assert "'LULL' is not numeric" in err and "row 7" in err and "text.csv" in err
    short = tmp_path / "short.csv"
    pd.read_csv(csv_path).head(60).to_csv(short, index=False)
    assert "too short" in _error(["--csv", str(short), "--target", "OT", *base], capsys)
    assert "no target column 'XX'" in _error(["--csv", str(csv_path), "--target", "XX", *base], capsys)
    assert "no such file" in _error(["--csv", str(tmp_path / "none.csv"), "--target", "OT", *base], capsys)
    assert "--model must be" in _error(
        ["--csv", str(csv_path), "--target", "OT", "--model", "x", *base], capsys
    )


def test_option_errors_name_the_option(csv_path, tmp_path, capsys):
    base = [
        "--csv",
        str(csv_path),
        "--target",
        "OT",
        "--seq-len",
        "24",
        "--pred-len",
        "8",
        "--backend",
        "numpy",
    ]
    assert "is a folder" in _error([*base, "--csv", str(tmp_path)], capsys)
    assert "--dropout must be in [0, 1)" in _error([*base, "--dropout", "1.5"], capsys)
    assert "--d-model 16 must be a multiple of --n-heads 3" in _error(
        [*base, "--d-model", "16", "--n-heads", "3"], capsys
    )
    assert "--lr must be > 0" in _error([*base, "--lr", "0"], capsys)
    assert "Invalid value for '--d-ff': Input should be greater than or equal to 1" in _error(
        [*base, "--d-ff", "0"], capsys
    )
    assert "--protocol must be one of neuronet, official, got 'paper'" in _error(
        [*base, "--protocol", "paper"], capsys
    )
    assert "--f-scaling must be one of exact, official" in _error([*base, "--f-scaling", "exactly"], capsys)


def test_official_protocol_on_the_command_line(csv_path, tmp_path, capsys):
    """The console says which protocol ran, and that the official figures score full test batches only."""
    argv = ["forecast", "--csv", str(csv_path), "--target", "OT", "--seq-len", "24", "--pred-len", "8",
            "--epochs", "1", "--backend", "numpy", "--protocol", "official", "--preset", "cpu",
            "--d-model", "4", "--n-heads", "2", "--layers", "1", "--d-ff", "8", "--batch-size", "16",
            "--no-progress", "--out", str(tmp_path / "r")]  # fmt: skip
    code, out, err = _main(argv, capsys)
    assert code == 0, err
    assert "atfnet on numpy, official protocol, preset cpu (--preset)" in err
    assert "official protocol, split 70/10/20" in out
    assert "scored as the official test loader: the first 64 of 73 test windows (full batches)" in out
    doc = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert doc["protocol"]["name"] == "official" and doc["all_windows"]["mse"]["naive"] > 0


@pytest.mark.parametrize(
    ("value", "problem"),
    [("inf", "an infinite value"), ("-inf", "an infinite value"),
     ("1e39", "a value beyond float32's range (3.4e38)")],
)  # fmt: skip
def test_values_a_float32_model_cannot_take_are_refused_by_row_and_column(csv_path, tmp_path, value, problem):
    frame = pd.read_csv(csv_path)
    frame["HUFL"] = frame["HUFL"].astype(object)
    frame.loc[9, "HUFL"] = value
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    with pytest.raises(ValueError) as exc:
        read_series(bad, "OT", "all")
    shown = f"{float(value):g}"
    assert str(exc.value) == f"{bad}: channel 'HUFL' has {problem} at row 11: {shown}"


def test_metrics_json_is_strict_json_with_null_for_undefined_figures(tmp_path, capsys):
    n = 300
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=n, freq="h").astype(str),
                          "OT": np.full(n, 5.0)})  # fmt: skip
    path = tmp_path / "flat.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "result"
    argv = ["forecast", "--csv", str(path), "--target", "OT", "--seq-len", "24", "--pred-len", "8",
            "--epochs", "1", "--model", "patchtst", "--backend", "numpy", "--d-model", "4", "--n-heads", "2",
            "--layers", "1", "--d-ff", "8", "--out", str(out)]  # fmt: skip
    code, _, err = _main(argv, capsys)
    assert code == 0, err

    def refuse(name):
        raise AssertionError(f"metrics.json holds the bare constant {name}")

    doc = json.loads((out / "metrics.json").read_text(), parse_constant=refuse)
    # a flat series never moves: the direction accuracy is undefined, written as null
    assert doc["direction_accuracy"]["linear"] is None and doc["mse"]["naive"] == 0.0


def _main(argv, capsys):
    from neuronet.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_ett_splits_are_12_4_4_months_of_rows():
    month = 30 * 24
    assert split_spans(25 * month, 96, 96, "ett-hour") == [
        (0, 12 * month), (12 * month - 96, 16 * month), (16 * month - 96, 20 * month)
    ]  # fmt: skip
    quarter = 4 * month
    assert split_spans(20 * quarter, 96, 24, "ett-minute")[2] == (16 * quarter - 96, 20 * quarter)
    assert split_spans(1000, 96, 24, "70/10/20") == [(0, 700), (604, 800), (704, 1000)]
    with pytest.raises(ValueError, match="too short for --split ett-hour: it takes 12/4/4 months"):
        split_spans(2000, 96, 24, "ett-hour", "x.csv")
    with pytest.raises(ValueError, match="--split must be one of 70/10/20, ett-hour, ett-minute"):
        split_spans(2000, 96, 24, "60/20/20")


def test_preset_is_chosen_by_device_and_said(csv_path, capsys):
    class Gpu:
        name = "opencl:H200"
        runtime = type("Runtime", (), {"is_cpu": False})()

    assert preset_for(Gpu())[0] == "paper"
    code, _, err = _main(["forecast", "--csv", str(csv_path), "--target", "OT", "--seq-len", "24",
                            "--pred-len", "8", "--epochs", "1", "--backend", "numpy", "--d-model", "8",
                            "--layers", "1", "--f-scaling", "official"], capsys)  # fmt: skip
    assert code == 0, err
    assert "atfnet on numpy, neuronet protocol, preset cpu (chosen for the device: numpy is not a GPU" in err
    assert "d_model 8, n_heads 4, layers 1, d_ff 128" in err  # explicit options win over the preset
    assert "epoch 1: loss" in err  # progress reaches the console even without a terminal


def test_official_f_scaling_reaches_the_model(csv_path):
    doc = run_forecast(csv_path, "OT", features="S", seq_len=24, pred_len=8, epochs=1, backend="numpy",
                       f_scaling="official")  # fmt: skip
    assert doc["layer"]["f_scaling"] == "official" and doc["split"] == "70/10/20"


def test_an_occupied_out_folder_is_refused_before_any_work(csv_path, tmp_path, capsys):
    out = tmp_path / "finished"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    argv = ["forecast", "--csv", str(tmp_path / "not-read.csv"), "--target", "OT", "--out", str(out)]
    code, _, err = _main(argv, capsys)
    assert code == 2 and "the folder is not empty" in err and "not-read.csv" not in err
    assert (out / "metrics.json").read_text() == "{}"
    bad_split = ["--csv", str(csv_path), "--target", "OT", "--split", "x"]
    assert "--split must be one of" in _error(bad_split, capsys)
