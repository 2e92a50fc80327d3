"""Saving and loading models: a versioned, self-describing, pickle-free file.

File format, version 1 (an uncompressed ZIP archive; the extension is free, ``.nnz`` is suggested)::

    header.json           UTF-8 JSON, described below
    params.npy            float64 (P,)  trainable parameters, layer by layer, no alignment padding
    state.npy             float64 (S,)  non-trainable state (batch-norm running mean/variance)
    optimizer_slot<k>.npy float64 (P,)  optimizer state, same order as params (Adam: m then v)

``header.json`` holds:

- ``format`` = ``"neuronet-model"`` and ``version`` = 1 (readers refuse other formats and newer versions);
- ``architecture``: ``Sequential.config()`` — ``input_shape``, ``layers`` (each layer's ``config()``),
  ``loss``, ``optimizer`` (type, hyper-parameters, schedule), ``seed``;
- ``training``: ``epochs_trained``, ``optimizer_iterations`` (Adam's step ``t``) and the dropout counters, so
  training resumes where it stopped;
- ``saved_from``: backend name and element dtype at save time (arrays are always stored as float64, which
  holds float32 values exactly, so a file moves between backends without loss);
- ``arrays``: for each ``.npy`` member its shape, dtype and SHA-256; ``payload_sha256`` is the SHA-256 of the
  members' bytes concatenated in sorted member order;
- ``metadata``: the caller's JSON-compatible dict (feature scaling, training period, metrics, ...); NumPy
  scalars and arrays are written as numbers and lists.

Every member is also covered by the ZIP CRC-32. Arrays are read with ``allow_pickle=False``. ``load`` checks
everything (archive, header, versions, checksums, shapes, architecture) before it builds the model, so a
truncated or corrupted file raises ``ModelFileError`` instead of yielding a half-loaded model. ``save`` writes
a temporary file next to the target and moves it into place with ``os.replace``, so a crash never leaves a
partial file under the final name.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from neuronet.errors import NeuronetError
from nn.backend import Backend
from nn.model import Sequential

FORMAT = "neuronet-model"
VERSION = 1


class ModelFileError(NeuronetError, ValueError):
    """A model file is unreadable: truncated, corrupted, not a model file, or from a newer version."""


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a, dtype=np.float64), allow_pickle=False)
    return buf.getvalue()


def save(model: Sequential, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> Path:
    """Write ``model`` (architecture, weights, optimizer and training state) and ``metadata`` to ``path``."""
    path = Path(path)
    metadata = dict(model.metadata if metadata is None else metadata)
    try:
        meta_json = json.loads(json.dumps(metadata, default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"save {path}: metadata must be JSON-compatible (numbers, strings, lists, dicts): {exc}"
        ) from None
    members = {f"{name}.npy": _npy_bytes(a) for name, a in model.export_arrays().items()}
    payload = hashlib.sha256()
    for name in sorted(members):
        payload.update(members[name])
    header = {
        "format": FORMAT,
        "version": VERSION,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "architecture": model.config(),
        "training": {
            "epochs_trained": model.epochs_trained,
            "optimizer_iterations": model.optimizer.iterations,
            "dropout_counters": {
                str(i): layer.counter for i, layer in enumerate(model.layers) if hasattr(layer, "counter")
            },
        },
        "saved_from": {"backend": model.backend.name, "dtype": str(np.dtype(model.backend.dtype))},
        "arrays": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), **_npy_info(data)}
            for name, data in members.items()
        },
        "payload_sha256": payload.hexdigest(),
        "metadata": meta_json,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
                zf.writestr("header.json", json.dumps(header, indent=1, allow_nan=False))
                for name, data in members.items():
                    zf.writestr(name, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    model.metadata = meta_json
    return path


def _npy_info(data: bytes) -> dict[str, Any]:
    a = np.load(io.BytesIO(data), allow_pickle=False)
    return {"shape": list(a.shape), "dtype": str(a.dtype)}


def _read(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify everything in the file; raise ``ModelFileError`` naming the first problem."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "header.json" not in names:
                raise ModelFileError(f"{path}: not a {FORMAT} file (no header.json)")
            header = json.loads(zf.read("header.json").decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise ModelFileError(f"{path}: not a {FORMAT} file")
            version = header.get("version")
            if not isinstance(version, int) or not 1 <= version <= VERSION:
                raise ModelFileError(
                    f"{path}: format version {version!r} is not one this library reads (1..{VERSION})"
                )
            blobs = {name: zf.read(name) for name in header["arrays"]}
    except ModelFileError:
        raise
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{path}: corrupted header.json ({exc})") from None
    except (
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,
        EOFError,
        KeyError,
        TypeError,
        ValueError,
    ) as exc:
        raise ModelFileError(f"{path}: truncated or corrupted model file ({exc})") from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
            raise
        raise ModelFileError(f"{path}: truncated or corrupted model file ({exc})") from None
    payload = hashlib.sha256()
    arrays = {}
    for name in sorted(blobs):
        data, info = blobs[name], header["arrays"][name]
        payload.update(data)
        if hashlib.sha256(data).hexdigest() != info.get("sha256"):
            raise ModelFileError(f"{path}: checksum mismatch in {name} (the file is corrupted)")
        try:
            a = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            raise ModelFileError(f"{path}: unreadable array {name} ({exc})") from None
        if list(a.shape) != info.get("shape") or a.dtype != np.float64:
            raise ModelFileError(f"{path}: array {name} has shape {a.shape} {a.dtype}, header says {info}")
        arrays[name.removesuffix(".npy")] = a
    if payload.hexdigest() != header.get("payload_sha256"):
        raise ModelFileError(f"{path}: payload checksum mismatch (the file is corrupted)")
    return header, arrays


def load(path: str | os.PathLike[str], backend: str | Backend | None = None) -> Sequential:
    """Rebuild a saved model on ``backend`` (default: the kind of backend it was saved from).

    Weights, optimizer state, non-trainable state, training counters and ``model.metadata`` are restored,
    so ``predict`` matches the saved model and ``fit`` continues where it stopped.
    """
    from nn import get_backend

    path = Path(path)
    header, arrays = _read(path)
    try:
        if backend is None:
            backend = "numpy" if header["saved_from"]["backend"] == "numpy" else "opencl"
        be = get_backend(backend)  # outside the rebuild check: a missing device is not a file problem
        arch, training = header["architecture"], header["training"]
        try:
            model = Sequential.from_specs(
                arch["layers"],
                arch["input_shape"],
                loss=arch["loss"],
                optimizer=arch["optimizer"],
                backend=be,
                seed=arch["seed"],
            )
            model.import_arrays(arrays)
        except ValueError as exc:
            raise ModelFileError(f"{path}: the stored architecture does not rebuild: {exc}") from None
        model.epochs_trained = int(training["epochs_trained"])
        model.optimizer.iterations = int(training["optimizer_iterations"])
        for i, counter in training["dropout_counters"].items():
            model.layers[int(i)].counter = int(counter)
        model.metadata = header["metadata"]
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ModelFileError(f"{path}: header is missing or has a malformed field ({exc!r})") from None
    return model
