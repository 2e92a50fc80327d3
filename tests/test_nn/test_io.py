"""Model files: exact round trips, resumable training, cross-backend loading, corruption detection."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nn import Adam, BatchNorm, Dense, Dropout, ModelFileError, Sequential, load, save
from nn.io import FORMAT, VERSION


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    return x, np.eye(3)[(x[:, 0] > 0).astype(int) + (x[:, 1] > 1)]


def _model(backend: str) -> Sequential:
    layers = [Dense(9, "tanh"), BatchNorm(), Dropout(0.2), Dense(5, "relu"), Dense(3, activation="softmax")]
    return Sequential(
        layers, input_shape=(6,), loss="cce", optimizer=Adam(lr=0.01, l2=1e-4), backend=backend, seed=3
    )


def test_save_load_predict_identical(backend, tmp_path):
    x, y = _data()
    model = _model(backend)
    model.fit(x, y, epochs=2, batch_size=16, progress=False)
    meta = {"scaler": {"mean": np.zeros(6), "std": np.float64(1.5)}, "period": ["2020-01-01", "2023-12-31"]}
    path = save(model, tmp_path / "model.nnz", meta)
    loaded = load(path, backend=backend)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert loaded.metadata == {
        "scaler": {"mean": [0.0] * 6, "std": 1.5},
        "period": ["2020-01-01", "2023-12-31"],
    }
    assert loaded.config() == model.config()
    assert loaded.epochs_trained == 2 and loaded.optimizer.iterations == model.optimizer.iterations
    for a, b in zip(loaded.export_arrays().values(), model.export_arrays().values(), strict=True):
        np.testing.assert_array_equal(a, b)  # weights, running statistics and Adam moments


def test_training_resumes_exactly_after_load(tmp_path):
    """Adam moments and step, dropout counters, schedule position and shuffling all survive the file."""
    x, y = _data()
    straight = _model("numpy")
    straight.fit(x, y, epochs=3, batch_size=16, progress=False)
    first = _model("numpy")
    first.fit(x, y, epochs=2, batch_size=16, progress=False)
    resumed = load(save(first, tmp_path / "m.nnz"))
    resumed.fit(x, y, epochs=1, batch_size=16, progress=False)
    np.testing.assert_array_equal(resumed.export_arrays()["params"], straight.export_arrays()["params"])


def test_model_moves_between_backends(backend, tmp_path):
    """Saved from NumPy, loaded on each backend (and back): predictions agree to the backend's precision."""
    x, y = _data()
    model = _model("numpy")
    model.fit(x, y, epochs=1, batch_size=16, progress=False)
    moved = load(save(model, tmp_path / "a.nnz"), backend=backend)
    tol = 1e-12 if backend == "numpy" else 1e-4
    np.testing.assert_allclose(moved.predict(x), model.predict(x), rtol=tol, atol=tol)
    back = load(save(moved, tmp_path / "b.nnz"), backend="numpy")
    np.testing.assert_allclose(back.predict(x), model.predict(x), rtol=tol, atol=tol)
    header = json.loads(zipfile.ZipFile(tmp_path / "b.nnz").read("header.json"))
    assert header["saved_from"]["backend"] == moved.backend.name


def test_file_layout_is_documented_and_pickle_free(tmp_path):
    model = _model("numpy")
    path = save(model, tmp_path / "m.nnz", {"note": "x"})
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        header = json.loads(zf.read("header.json"))
        params = np.load(zf.open("params.npy"), allow_pickle=False)
    assert names == {"header.json", "params.npy", "state.npy", "optimizer_slot0.npy", "optimizer_slot1.npy"}
    assert header["format"] == FORMAT and header["version"] == VERSION
    assert params.dtype == np.float64 and params.shape == (model.parameter_count,)
    assert header["arrays"]["params.npy"]["shape"] == [model.parameter_count]
    assert header["architecture"]["layers"][1] == {"type": "batchnorm", "momentum": 0.1, "eps": 1e-5}


def test_truncated_file_is_reported(tmp_path):
    path = save(_model("numpy"), tmp_path / "m.nnz")
    data = path.read_bytes()
    for cut in (len(data) // 3, len(data) - 10):
        broken = tmp_path / f"cut{cut}.nnz"
        broken.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match="truncated or corrupted"):
            load(broken)


def test_corrupted_payload_is_reported(tmp_path):
    model = _model("numpy")
    path = save(model, tmp_path / "m.nnz")
    # Rewrite params.npy with one weight changed but keep the header: only the SHA-256 can tell.
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    params = np.load(io.BytesIO(members["params.npy"]), allow_pickle=False)
    params[0] += 1.0
    buf = io.BytesIO()
    np.save(buf, params)
    members["params.npy"] = buf.getvalue()
    tampered = tmp_path / "tampered.nnz"
    with zipfile.ZipFile(tampered, "w") as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    with pytest.raises(ModelFileError, match=r"checksum mismatch in params\.npy"):
        load(tampered)


def test_every_damaged_byte_is_caught_or_harmless(tmp_path):
    """Flip bytes all over a file: each load raises ModelFileError or (ZIP bookkeeping fields the reader
    ignores) yields exactly the saved model; never a raw error or a silently different model."""
    model = Sequential([Dense(4, "tanh"), Dense(2)], input_shape=(3,), backend="numpy")
    x = np.random.default_rng(0).normal(size=(5, 3))
    raw = save(model, tmp_path / "m.nnz").read_bytes()
    damaged, caught = tmp_path / "damaged.nnz", 0
    for i in range(0, len(raw), 13):
        flipped = bytearray(raw)
        flipped[i] ^= 0x5A
        damaged.write_bytes(bytes(flipped))
        try:
            np.testing.assert_array_equal(load(damaged).predict(x), model.predict(x))
        except ModelFileError:
            caught += 1
    assert caught > 0.8 * len(range(0, len(raw), 13))
    for cut in range(0, len(raw), 31):
        damaged.write_bytes(raw[:cut])
        with pytest.raises(ModelFileError):
            load(damaged)


def test_wrong_files_are_reported(tmp_path):
    not_zip = tmp_path / "notes.txt"
    not_zip.write_text("hello")
    with pytest.raises(ModelFileError, match="truncated or corrupted"):
        load(not_zip)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "x")
    with pytest.raises(ModelFileError, match=r"no header\.json"):
        load(other)
    future = tmp_path / "future.nnz"
    with zipfile.ZipFile(future, "w") as zf:
        zf.writestr("header.json", json.dumps({"format": FORMAT, "version": VERSION + 1, "arrays": {}}))
    with pytest.raises(ModelFileError, match="version"):
        load(future)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.nnz")


def test_save_is_atomic(tmp_path):
    model = _model("numpy")
    path = save(model, tmp_path / "m.nnz", {"v": 1})
    before = path.read_bytes()
    with pytest.raises(ValueError, match="JSON-compatible"):
        save(model, path, {"bad": object()})
    assert path.read_bytes() == before  # the old file is untouched
    save(model, path, {"v": 2})
    assert load(path).metadata == {"v": 2}
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["m.nnz"]  # no temporary files left
