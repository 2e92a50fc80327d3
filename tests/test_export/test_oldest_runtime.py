"""The exported models on the oldest onnxruntime that installs here, in a venv of its own, against the Python
EAs on every forward window: 1.14.1, the release MetaTrader 5 embeds, where a Python 3.10 is on the PATH (it
has no wheels for later Pythons), else 1.15.0, the oldest with wheels for this Python."""

import shutil
import subprocess
import sys

import numpy as np
import pytest
from test_export.export_support import copy_rates

from nn import load, save
from strategies.export import FORECAST_TOLERANCE, TOLERANCE, export

pytestmark = pytest.mark.slow
RELEASES = (("python3.10", "1.14.1"), (sys.executable, "1.15.0"))  # the oldest first
SCRIPT = (
    "import sys, numpy as np, onnxruntime as ort; assert ort.__version__ == sys.argv[4];"
    "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']);"
    "np.save(sys.argv[3], s.run(None, {s.get_inputs()[0].name: np.load(sys.argv[2])})[0])"
)


def _venv(base: str, release: str, folder) -> str | None:
    """A venv of ``base`` with onnxruntime ``release``: its python, or None when it does not install."""
    if shutil.which(base) is None:
        return None
    venv = folder / f"venv-{release}"
    made = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True)
    python = str(venv / "bin" / "python")
    pip = (
        made.returncode
        or subprocess.run(
            [python, "-m", "pip", "install", "-q", f"onnxruntime=={release}", "numpy<2"], capture_output=True
        ).returncode
    )
    return None if pip else python


@pytest.fixture(scope="module")
def oldest(tmp_path_factory):
    """A function running an ONNX model on the oldest onnxruntime that installs (skips if none does)."""
    folder = tmp_path_factory.mktemp("ort")
    found = next(((p, r) for base, r in RELEASES if (p := _venv(base, r, folder)) is not None), None)
    if found is None:
        pytest.skip(f"none of onnxruntime {', '.join(r for _, r in RELEASES)} installs here")
    python, release = found

    def run(model_path, inputs: np.ndarray, where) -> np.ndarray:
        np.save(where / "inputs.npy", inputs)
        subprocess.run([python, "-c", SCRIPT, str(model_path), str(where / "inputs.npy"),
                        str(where / "outputs.npy"), release], check=True)  # fmt: skip
        return np.load(where / "outputs.npy")

    run.release = release
    return run


def test_the_fractal_ea_on_the_oldest_onnxruntime(oldest, dense_run, dense_model, candles, tmp_path):
    done = export(dense_model, tmp_path)
    decided = dense_run.ea_instance._decided
    bars = np.array(sorted(decided))
    want = np.stack([decided[b] for b in bars])
    got = oldest(done.onnx_path, copy_rates(candles, done.bars, bars), tmp_path)
    print(f"onnxruntime {oldest.release}")
    assert (got.argmax(axis=1) == want.argmax(axis=1)).all() and np.abs(got - want).max() <= TOLERANCE


@pytest.mark.parametrize("model", ["atfnet", "patchtst"])
def test_forecast_ea_on_the_oldest_onnxruntime(oldest, forecast_runs, forecast_models, candles, model,
                                               tmp_path):  # fmt: skip
    ea = forecast_runs[model].ea_instance
    done = export(forecast_models[model], tmp_path)
    bars = np.array([bar for bar, *_ in ea._log])
    want = np.stack([path for _, path, *_ in ea._log])
    got = oldest(done.onnx_path, copy_rates(candles, done.bars, bars - 1), tmp_path)[:, :, ea._close]
    assert len(bars) == 500
    assert np.abs(got - want).max() <= FORECAST_TOLERANCE * min(ea.scaler.std[ea._close], np.abs(want).min())


def test_a_csv_forecaster_on_the_oldest_onnxruntime(oldest, forecast_models, tmp_path):
    net = load(forecast_models["atfnet"], backend="numpy")
    mean, std = np.array([1.2, 1.0, 900.0, 10.0]), np.array([0.01, 0.02, 300.0, 2.0])
    meta = {"channels": ["a", "b", "c", "OT"], "target": "OT", "seq_len": 48, "pred_len": 12,
            "scaler_mean": mean.tolist(), "scaler_std": std.tolist()}  # fmt: skip
    done = export(save(net, tmp_path / "csv.nnz", meta), tmp_path)
    rng = np.random.default_rng(5)
    windows = mean + std * np.cumsum(rng.normal(scale=0.3, size=(300, 48, 4)), axis=1)
    want = net.predict((windows - mean) / std) * std + mean
    got = oldest(done.onnx_path, windows, tmp_path)
    assert (np.abs(got - want) / std).max() <= FORECAST_TOLERANCE
