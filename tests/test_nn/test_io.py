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
    path = save(model, tmp_path / "model.nnz", meta, optimizer=True)
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
    resumed = load(save(first, tmp_path / "m.nnz", optimizer=True))
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
    assert names == {"header.json", "params.npy", "state.npy"}  # the optimizer state only when asked
    with zipfile.ZipFile(save(model, tmp_path / "o.nnz", optimizer=True)) as zf:
        assert {"optimizer_slot0.npy", "optimizer_slot1.npy"} < set(zf.namelist())
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


def test_weights_are_stored_in_the_training_dtype_and_the_file_is_their_size(backend, tmp_path):
    model = Sequential([Dense(300, "tanh"), Dense(200), Dense(3)], input_shape=(50,), backend=backend)
    path = save(model, tmp_path / "m.nnz")
    dtype = np.dtype(model.backend.dtype)
    with zipfile.ZipFile(path) as zf:
        assert np.load(zf.open("params.npy"), allow_pickle=False).dtype == dtype
    weights = model.parameter_count * dtype.itemsize
    assert weights < path.stat().st_size < weights + 16_000  # header and ZIP records only
    x = np.random.default_rng(1).normal(size=(4, 50))
    np.testing.assert_array_equal(load(path, backend=backend).predict(x), model.predict(x))
    # Loading converts: a float32 file on the float64 reference gives the float32 weights exactly.
    ref = load(path, backend="numpy")
    np.testing.assert_array_equal(
        ref.export_arrays()["params"], model.export_arrays()["params"].astype(dtype).astype(np.float64)
    )


def test_without_optimizer_state_training_restarts_the_optimizer(tmp_path):
    x, y = _data()
    model = _model("numpy")
    model.fit(x, y, epochs=1, batch_size=16, progress=False)
    loaded = load(save(model, tmp_path / "m.nnz"))
    assert loaded.optimizer.iterations == 0 and loaded.epochs_trained == 1
    assert not loaded.export_arrays()["optimizer_slot0"].any()
    loaded.fit(x, y, epochs=1, batch_size=16, progress=False)  # trains on from the saved weights


def test_version_1_files_still_load(tmp_path):
    """A version 1 file (every array float64, optimizer slots always present), written as 0.1 did."""
    import hashlib

    x, y = _data()
    model = _model("numpy")
    model.fit(x, y, epochs=1, batch_size=16, progress=False)
    members = {}
    for name, a in model.export_arrays().items():
        buf = io.BytesIO()
        np.save(buf, a.astype(np.float64), allow_pickle=False)
        members[f"{name}.npy"] = buf.getvalue()
    payload = hashlib.sha256(b"".join(members[n] for n in sorted(members))).hexdigest()
    header = {
        "format": FORMAT, "version": 1, "architecture": model.config(),
        "training": {"epochs_trained": 1, "optimizer_iterations": model.optimizer.iterations,
                     "dropout_counters": {"2": model.layers[2].counter}},
        "saved_from": {"backend": "numpy", "dtype": "float64"},
        "arrays": {n: {"sha256": hashlib.sha256(b).hexdigest(), "shape": list(np.load(io.BytesIO(b)).shape),
                       "dtype": "float64"} for n, b in members.items()},
        "payload_sha256": payload, "metadata": {"old": True},
    }  # fmt: skip
    old = tmp_path / "v1.nnz"
    with zipfile.ZipFile(old, "w") as zf:
        zf.writestr("header.json", json.dumps(header))
        for name, blob in members.items():
            zf.writestr(name, blob)
    loaded = load(old)
    assert loaded.optimizer.iterations == model.optimizer.iterations and loaded.metadata == {"old": True}
    for a, b in zip(loaded.export_arrays().values(), model.export_arrays().values(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_version_2_files_without_a_kind_load_as_sequential(tmp_path):
    """Version 2 headers had no ``kind``: such a file is a Sequential model, also when asked for by kind."""
    x, _ = _data()
    model = _model("numpy")
    path = save(model, tmp_path / "m.nnz")

    def as_version_2(h):
        h["version"] = 2
        del h["kind"]

    old = _rewrite(path, tmp_path / "v2.nnz", header=as_version_2)
    np.testing.assert_array_equal(load(old, kind="sequential").predict(x), model.predict(x))


def _rewrite(src: Path, dst: Path, *, header=None, members=None, compress=None) -> Path:
    """A copy of a model file with the header edited and members replaced."""
    with zipfile.ZipFile(src) as zf:
        old = {name: zf.read(name) for name in zf.namelist()}
    head = json.loads(old.pop("header.json"))
    if header is not None:
        header(head)
    old.update(members or {})
    with zipfile.ZipFile(dst, "w", compression=compress or zipfile.ZIP_STORED) as zf:
        zf.writestr("header.json", head if isinstance(head, str) else json.dumps(head))
        for name, blob in old.items():
            zf.writestr(name, blob)
    return dst


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=a.dtype == object)
    return buf.getvalue()


def _bomb(good: Path, path: Path, elements: int, declared: int) -> Path:
    """``good`` plus a deflated all-zero float64 member ``big.npy`` of ``elements`` values, declared in the
    header with ``declared`` elements: a file of a few hundred KB that inflates to ``8 * elements`` bytes."""
    prefix = io.BytesIO()
    declaration = {"descr": "<f8", "fortran_order": False, "shape": (elements,)}
    np.lib.format.write_array_header_1_0(prefix, declaration)
    big = {"shape": [declared], "dtype": "float64", "sha256": "0" * 64}
    _rewrite(good, path, header=lambda h: h["arrays"].update({"big.npy": big}))
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as zf, zf.open("big.npy", "w") as f:
        f.write(prefix.getvalue())
        block = bytes(2**20)
        for _ in range(elements * 8 // 2**20):
            f.write(block)
    return path


def test_a_small_file_inflating_to_a_huge_array_is_refused_without_reading_it(tmp_path, monkeypatch):
    import tracemalloc

    import nn.io

    good = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    n = 2**23  # 64 MiB inflated
    lying = _bomb(good, tmp_path / "lying.nnz", n, 2**36)  # the header declares 512 GiB
    short = _bomb(good, tmp_path / "short.nnz", n, 2**30)  # the header declares more than the entry holds
    honest = _bomb(good, tmp_path / "honest.nnz", n, n)  # consistent, but over the (lowered) cap
    assert lying.stat().st_size < 2**20
    monkeypatch.setattr(nn.io, "MAX_ARRAY_BYTES", 2**20)
    tracemalloc.start()
    for path, reason in ((lying, "declares"), (short, "declares|holds"), (honest, "at most")):
        with pytest.raises(ModelFileError, match=rf"big\.npy.*({reason})|({reason}).*big\.npy"):
            load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20  # nothing near the 64 MiB was ever allocated


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda h: h["arrays"]["params.npy"].update(shape=[2**36]), "declares 549755813888 bytes"),
        (lambda h: h["arrays"]["params.npy"].update(shape=[-1]), "declares shape"),
        (lambda h: h["arrays"]["params.npy"].update(shape="many"), "declares shape"),
        (lambda h: h["arrays"]["params.npy"].update(dtype="object"), "declares dtype 'object'"),
        (lambda h: h["arrays"]["params.npy"].update(dtype="int64"), "declares dtype 'int64'"),
        (lambda h: h["arrays"].update({"params.npy": "x"}), "is not a table"),
        (lambda h: h.update(arrays=[]), "no arrays table"),
    ],
    ids=["2^36 elements", "negative", "not a list", "object dtype", "int dtype", "entry", "table"],
)
def test_nonsense_declarations_are_the_model_file_error(tmp_path, edit, reason):
    good = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    with pytest.raises(ModelFileError, match=reason):
        load(_rewrite(good, tmp_path / "bad.nnz", header=edit))


def test_array_members_that_disagree_with_the_header_are_refused(tmp_path):
    model = Sequential([Dense(2)], input_shape=(3,), backend="numpy")
    good = save(model, tmp_path / "m.nnz")
    n = model.parameter_count
    cases = {
        "object": _npy(np.array([{"a": 1}] * n, dtype=object)),
        "int": _npy(np.zeros(n, dtype=np.int64)),
        "float32": _npy(np.zeros(n, dtype=np.float32)),
        "shape": _npy(np.zeros(n + 1)),
        "fortran": _npy(np.asfortranarray(np.zeros((n, 2)))),
        "not npy": b"\x00" * 200,
    }
    for label, blob in cases.items():
        bad = _rewrite(good, tmp_path / f"{label}.nnz", members={"params.npy": blob})
        with pytest.raises(ModelFileError, match=r"params\.npy"):
            load(bad)


def test_a_deeply_nested_header_is_the_model_file_error(tmp_path):
    good = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    deep = '{"format": "neuronet-model", "version": 2, "arrays": {}, "metadata": ' + "[" * 100_000
    deep += "]" * 100_000 + "}"
    bad = tmp_path / "deep.nnz"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("header.json", deep)
    with pytest.raises(ModelFileError, match="nests deeper"):
        load(bad)
    assert good.is_file()


def test_model_files_get_the_usual_permissions(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_killed_writers_temp_file_is_removed_by_a_later_save_once_stale(tmp_path):
    import os
    import time

    model = Sequential([Dense(2)], input_shape=(3,), backend="numpy")
    stale, fresh = tmp_path / ".m.nnz.0a1b2c.tmp", tmp_path / ".m.nnz.3d4e5f.tmp"
    for p in (stale, fresh):
        p.write_bytes(b"PK half a model")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    save(model, tmp_path / "m.nnz")
    assert not stale.exists() and fresh.exists()  # a fresh one may be a live writer's


# -- sizes before allocation, regular files only ------------------------------------------------------------


def _huge_dense(h: dict) -> None:
    """The header of a 3-input, 2-unit model rewritten to declare a 20000 x 20000 layer; the stored
    arrays stay those of the small model (a 2 KB file)."""
    h["architecture"]["input_shape"] = [20000]
    h["architecture"]["layers"][0]["units"] = 20000


def test_seed_a_small_file_declaring_a_huge_layer_is_refused_before_building_it(tmp_path):
    import tracemalloc

    good = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    bad = _rewrite(good, tmp_path / "huge.nnz", header=_huge_dense)
    assert bad.stat().st_size < 4096
    tracemalloc.start()
    with pytest.raises(ModelFileError, match=r"params\.npy is declared \[8\], the stored architecture needs "
                                             r"\[400020000\]"):  # fmt: skip
        load(bad, backend="numpy")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 2**20  # the 3.2 GB of weights (and as much again for gradients) never existed


def test_declared_arrays_must_be_exactly_those_of_the_architecture(tmp_path):
    good = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    extra = {"shape": [4], "dtype": "float64", "sha256": "0" * 64}
    bad = _rewrite(good, tmp_path / "x.nnz", header=lambda h: h["arrays"].update({"extra.npy": extra}))
    with pytest.raises(ModelFileError, match=r"arrays \['extra\.npy'\] missing or unexpected"):
        load(bad)
    gone = _rewrite(good, tmp_path / "y.nnz", header=lambda h: h["arrays"].pop("state.npy"))
    with pytest.raises(ModelFileError, match=r"arrays \['state\.npy'\] missing or unexpected"):
        load(gone)


def test_a_parameter_free_layer_with_huge_constant_tables_is_refused(tmp_path):
    """``extended_dft`` holds no parameters but builds an (L, 2F) basis: 10^5 bars would be 10^10
    elements from a file of a few hundred bytes."""
    from nn.spectral import ExtendedDFT

    good = save(Sequential([ExtendedDFT(4)], input_shape=(8,), backend="numpy"), tmp_path / "dft.nnz")
    assert load(good).predict(np.ones((1, 8))).shape == (1, 7, 2)

    def huge(h):
        h["architecture"]["input_shape"] = [100000]
        h["architecture"]["layers"][0]["pred_len"] = 100000

    with pytest.raises(ModelFileError, match="constant elements"):
        load(_rewrite(good, tmp_path / "big.nnz", header=huge))


def test_a_broken_architecture_is_the_model_file_error(tmp_path):
    good = save(Sequential([Dense(2)], input_shape=(3,), backend="numpy"), tmp_path / "m.nnz")
    for edit in (
        lambda h: h["architecture"].update(input_shape=[0]),
        lambda h: h["architecture"].update(input_shape="wide"),
        lambda h: h["architecture"]["layers"][0].update(type="teleport"),
        lambda h: h["architecture"].pop("layers"),
    ):
        with pytest.raises(ModelFileError, match="architecture does not rebuild"):
            load(_rewrite(good, tmp_path / "b.nnz", header=edit))


@pytest.mark.parametrize("kind", ["folder", "device", "pipe"])
def test_only_a_regular_file_is_read_as_a_model(tmp_path, kind):
    """A folder, ``/dev/zero`` (an endless read) and a FIFO (whose ``open`` blocks until a writer comes)
    are refused at once with one line naming the path."""
    import os
    import threading

    if kind == "folder":
        path, words = tmp_path, "is a folder"
    elif kind == "device":
        path, words = Path(os.devnull if not Path("/dev/zero").exists() else "/dev/zero"), "device"
    else:
        if not hasattr(os, "mkfifo"):
            pytest.skip("named pipes are POSIX")
        path, words = tmp_path / "pipe.nnz", "is a pipe"
        os.mkfifo(path)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            load(path)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(30)
    assert outcome, f"load({path}) did not return"
    family = IsADirectoryError if kind == "folder" else ModelFileError
    assert isinstance(outcome[0], family) and words in str(outcome[0]), outcome[0]
    assert str(path) in str(outcome[0]) and "\n" not in str(outcome[0])
