"""DBN model files: the project's pickle-free archive layout (see ``nn.io``), format ``neuronet-dbn``.

An uncompressed ZIP with ``header.json`` (format, version, the ``DBNConfig``, layer shapes, criteria, the
caller's metadata, each member's SHA-256) and float64 ``.npy`` members: ``layer<k>_{w,b,c,q_mean,skewness}``
and ``head<k>_{w,b}``. Written to a temporary file and moved into place; read with ``allow_pickle=False``
after every checksum and shape has been checked, so a damaged file is one clear error.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from nn.dbn import DBN, RBMLayer, config_dict, config_from_dict
from nn.io import ModelFileError
from nn.mlfn import Net

FORMAT = "neuronet-dbn"
VERSION = 1
_LAYER = ("w", "b", "c", "q_mean", "skewness")


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a, dtype=np.float64), allow_pickle=False)
    return buf.getvalue()


def save_dbn(model: DBN, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> Path:
    """Write ``model`` and JSON-compatible ``metadata`` (scaling, variable names, ...) to ``path``."""
    path = Path(path)
    members: dict[str, bytes] = {}
    for k, layer in enumerate(model.layers):
        for name in _LAYER:
            members[f"layer{k}_{name}.npy"] = _npy(getattr(layer, name))
    for k, (w, b) in enumerate(model.head.layers):
        members[f"head{k}_w.npy"], members[f"head{k}_b.npy"] = _npy(w), _npy(b)
    try:
        meta = json.loads(json.dumps(metadata or {}, allow_nan=False, default=_plain))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"save {path}: metadata must be JSON-compatible: {exc}") from None
    header = {
        "format": FORMAT, "version": VERSION, "config": config_dict(model.config), "n_inputs": model.n_inputs,
        "n_layers": len(model.layers), "n_head": len(model.head.layers), "classifier": model.head.classifier,
        "fine_tuned": model.fine_tuned, "log": model.log, "metadata": meta,
        "arrays": {name: hashlib.sha256(data).hexdigest() for name, data in members.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
                zf.writestr("header.json", json.dumps(header, indent=1, allow_nan=False, default=_plain))
                for name, data in members.items():
                    zf.writestr(name, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON-compatible")


def load_dbn(path: str | os.PathLike[str]) -> tuple[DBN, dict[str, Any]]:
    """``(model, metadata)`` from a file written by ``save_dbn``; ``ModelFileError`` names what is wrong."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            header = json.loads(zf.read("header.json"))
            if header.get("format") != FORMAT:
                raise ModelFileError(f"{path}: not a DBN model file (format {header.get('format')!r})")
            if header.get("version", 0) > VERSION:
                raise ModelFileError(f"{path}: DBN file version {header['version']} is newer than {VERSION}")
            arrays = {}
            for name, digest in header["arrays"].items():
                data = zf.read(name)
                if hashlib.sha256(data).hexdigest() != digest:
                    raise ModelFileError(f"{path}: member {name} is corrupted (checksum mismatch)")
                arrays[name[:-4]] = np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, zipfile.BadZipFile, KeyError, json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{path}: cannot read DBN model file: {exc}") from None
    try:
        cfg = config_from_dict(header["config"])
        layers = [RBMLayer(*(arrays[f"layer{k}_{n}"] for n in _LAYER)) for k in range(header["n_layers"])]
        head = Net([(arrays[f"head{k}_w"], arrays[f"head{k}_b"]) for k in range(header["n_head"])],
                   bool(header["classifier"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: incomplete DBN model file: {exc}") from None
    model = DBN(layers, head, cfg, int(header["n_inputs"]), bool(header["fine_tuned"]), dict(header["log"]))
    return model, header["metadata"]
