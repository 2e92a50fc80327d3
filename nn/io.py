"""Saving and loading models: a versioned, self-describing, pickle-free file.

File format, version 3 (an uncompressed ZIP archive; the extension is free, ``.nnz`` is suggested). One
container for every model kind; the members of a ``Sequential`` (kind ``"sequential"``) are::

    header.json           UTF-8 JSON, described below
    params.npy            (P,)  trainable parameters, layer by layer, no alignment padding
    state.npy             (S,)  non-trainable state (batch-norm running mean/variance)
    optimizer_slot<k>.npy (P,)  optimizer state, same order as params (Adam: m then v); only when saved
                                with ``optimizer=True``

Arrays are stored in the dtype the model was trained in (``float32`` on a float32 device, ``float64`` on
the NumPy backend), so a file is about the size of its weights; ``load`` converts them to the target
backend's dtype. The optimizer state doubles (Adam: triples) a file and is needed only to resume training
exactly, so it is written only when asked for; without it, ``fit`` after ``load`` starts the optimizer
afresh (zero moments, step 0).

Any other model kind (``MODEL_KINDS``: a deep belief net, ``"dbn"``) stores its own named arrays
(``export_arrays``), architecture (``architecture``) and training records (``training_state``) in the same
members and fields, checked the same way on reading; its class rebuilds it (``from_saved``) and says what
does not fit.

``header.json`` holds:

- ``format`` = ``"neuronet-model"`` and ``version`` = 3 (readers refuse other formats and newer versions;
  version 1 files — every array float64, optimizer state always present — and version 2 files still load);
- ``kind``: ``"sequential"`` (absent before version 3) or another key of ``MODEL_KINDS``;
- ``architecture``: ``Sequential.config()`` — ``input_shape``, ``layers`` (each layer's ``config()``),
  ``loss``, ``optimizer`` (type, hyper-parameters, schedule), ``seed``;
- ``training``: ``epochs_trained``, ``optimizer_iterations`` (Adam's step ``t``), ``optimizer_state``
  (whether the slots are in the file) and the dropout counters, so training resumes where it stopped;
- ``saved_from``: backend name and element dtype at save time;
- ``arrays``: for each ``.npy`` member its shape, dtype and SHA-256; ``payload_sha256`` is the SHA-256 of the
  members' bytes concatenated in sorted member order;
- ``metadata``: the caller's JSON-compatible dict (feature scaling, training period, metrics, ...); NumPy
  scalars and arrays are written as numbers and lists.

Reading trusts nothing: only a regular file is opened (``neuronet.userfiles``: not a folder, a device
such as ``/dev/zero`` or a pipe); the header is read only up to ``MAX_HEADER_BYTES`` and parsed with its
nesting bounded; for a ``Sequential``, the architecture is sized from its layers' shapes alone
(``nn.model_layout.model_sizes``) and must declare exactly the arrays it needs, of exactly those sizes, with
constant tables (DFT bases, positional tables) of at most ``MAX_CONSTANT_ELEMENTS``; each array's declared
shape and dtype (float32 or float64 only) must fit ``MAX_ARRAY_BYTES`` in all and agree with the ``.npy``
member's own header and with the ZIP entry's uncompressed size before a byte of data is read; data is read
in chunks into the final array while its checksum is computed. So a small file that declares a huge layer,
or declares or inflates to a huge array, is refused without allocating it, and every failure — file type,
archive, header, versions, checksums, shapes, architecture — raises ``ModelFileError`` with the reason
before the model is built. ``save`` writes a temporary file next to the target and moves it into place with
``os.replace``, so a crash never leaves a partial file under the final name.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from neuronet.atomic import replace_atomically
from neuronet.errors import NeuronetError
from neuronet.userfiles import NotAFileError, open_regular
from nn.backend import Backend
from nn.backend_choice import get_backend
from nn.dbn import DBN
from nn.errors import NNConfigError, NNTypeError
from nn.model import Sequential
from nn.model_layout import model_sizes

FORMAT = "neuronet-model"
VERSION = 3
MAX_HEADER_BYTES = 16 * 2**20
MAX_HEADER_DEPTH = 64  # architecture and metadata nest a handful of levels; JSON's own limit is ~1000
MAX_ARRAY_BYTES = 8 * 2**30  # all arrays of one file together (a 1-billion-parameter float64 model)
# Constant tables a model's layers build from its shapes: an ATFNet over 512 bars forecasting 96 needs
# about 0.6 million elements; 2**27 (1 GiB in float64) leaves room for far longer series.
MAX_CONSTANT_ELEMENTS = 2**27
_DTYPES = {"float32": np.dtype("<f4"), "float64": np.dtype("<f8")}
_CHUNK = 2**20


class ModelFileError(NeuronetError, ValueError):
    """A model file is unreadable: truncated, corrupted, not a model file, or from a newer version."""


@runtime_checkable
class SavedModel(Protocol):
    """A model kind other than ``Sequential`` that this format stores (registered in ``MODEL_KINDS``).

    ``architecture()`` is the JSON architecture, ``export_arrays()`` the named arrays, ``training_state()``
    JSON training records (logs); ``from_saved(architecture, arrays, training)`` rebuilds the model and raises
    ``ValueError`` naming what does not fit, which ``load`` reports as a ``ModelFileError``."""

    model_kind: ClassVar[str]
    metadata: dict

    def architecture(self) -> dict: ...

    def export_arrays(self) -> dict[str, np.ndarray]: ...

    def training_state(self) -> dict: ...


MODEL_KINDS: dict[str, type] = {"dbn": DBN}
"""Stored model kinds besides ``"sequential"``, by the ``kind`` field of the header."""


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _npy_bytes(a: np.ndarray, dtype: np.dtype) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a, dtype=dtype), allow_pickle=False)
    return buf.getvalue()


def save(
    model: Sequential | SavedModel,
    path: str | os.PathLike[str],
    metadata: dict[str, Any] | None = None,
    *,
    optimizer: bool = False,
) -> Path:
    """Write ``model`` (architecture, weights, training state) and ``metadata`` to ``path``.

    ``model`` is a ``Sequential`` (with ``optimizer=True`` its optimizer state too, so that ``fit`` after
    ``load`` continues exactly) or any other model kind of ``MODEL_KINDS`` (a ``SavedModel``)."""
    path = Path(path)
    metadata = dict(model.metadata if metadata is None else metadata)
    try:
        meta_json = json.loads(json.dumps(metadata, default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise NNConfigError(
            f"save {path}: metadata must be JSON-compatible (numbers, strings, lists, dicts): {exc}"
        ) from None
    if not isinstance(model, Sequential):
        kind = getattr(model, "model_kind", None)
        if MODEL_KINDS.get(kind) is not type(model):
            raise NNTypeError(f"save {path}: {type(model).__name__} is not a model kind this format stores")
        arrays = model.export_arrays()
        dtypes = {np.dtype(a.dtype).name for a in arrays.values()}
        dtype = _DTYPES["float32"] if dtypes == {"float32"} else _DTYPES["float64"]
        saved_from = {"backend": "numpy", "dtype": dtype.name}
        _write(path, kind, model.architecture(), model.training_state(), saved_from, arrays, dtype, meta_json)
        model.metadata = meta_json
        return path
    dtype = np.dtype(model.backend.dtype)
    dtype = dtype if dtype.name in _DTYPES else np.dtype(np.float64)
    arrays = model.export_arrays()
    if not optimizer:
        arrays = {k: v for k, v in arrays.items() if not k.startswith("optimizer_slot")}
    training = {
        "epochs_trained": model.epochs_trained,
        "optimizer_iterations": model.optimizer.iterations if optimizer else 0,
        "optimizer_state": bool(optimizer),
        "dropout_counters": {
            str(i): layer.counter for i, layer in enumerate(model.layers) if hasattr(layer, "counter")
        },
    }
    saved_from = {"backend": model.backend.name, "dtype": str(np.dtype(model.backend.dtype))}
    _write(path, "sequential", model.config(), training, saved_from, arrays, dtype, meta_json)
    model.metadata = meta_json
    return path


def _write(
    path: Path,
    kind: str,
    architecture: dict,
    training: dict,
    saved_from: dict,
    arrays: dict[str, np.ndarray],
    dtype: np.dtype,
    metadata: dict,
) -> None:
    """The one container of every model kind: header plus checksummed ``.npy`` members, written atomically."""
    members = {f"{name}.npy": _npy_bytes(a, dtype) for name, a in arrays.items()}
    payload = hashlib.sha256()
    for name in sorted(members):
        payload.update(members[name])
    header = {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "architecture": architecture,
        "training": training,
        "saved_from": saved_from,
        "arrays": {
            name: {
                "sha256": hashlib.sha256(members[name]).hexdigest(),
                "shape": list(a.shape),
                "dtype": dtype.name,
            }
            for name, a in ((f"{k}.npy", v) for k, v in arrays.items())
        },
        "payload_sha256": payload.hexdigest(),
        "metadata": metadata,
    }
    text = json.dumps(header, indent=1, allow_nan=False, default=_json_default)

    def write(f: IO[bytes]) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr("header.json", text)
            for name, data in members.items():
                zf.writestr(name, data)

    _atomic_write(path, write)


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """The shared atomic writer (``neuronet.atomic``: temporary file, fsync, rename, stale temporary files
    removed), after the model layer's own check of the path."""
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder; give a model file name to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, write)


def _depth(text: str) -> int:
    """The deepest nesting of JSON arrays/objects in ``text``, counted without parsing it (strings first
    removed, then a running sum of brackets)."""
    bare = np.frombuffer(re.sub(r'"(?:[^"\\]|\\.)*"', '""', text).encode("utf-8"), dtype=np.uint8)
    step = np.isin(bare, (ord("["), ord("{"))).astype(np.int64) - np.isin(bare, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _read_header(zf: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    try:
        info = zf.getinfo("header.json")
    except KeyError:
        raise ModelFileError(f"{path}: not a {FORMAT} file (no header.json)") from None
    if info.file_size > MAX_HEADER_BYTES:
        raise ModelFileError(f"{path}: header.json of {info.file_size} bytes (at most {MAX_HEADER_BYTES})")
    with zf.open(info) as f:
        text = f.read(MAX_HEADER_BYTES + 1).decode("utf-8")
    if _depth(text) > MAX_HEADER_DEPTH:
        raise ModelFileError(f"{path}: header.json nests deeper than {MAX_HEADER_DEPTH} levels")
    try:
        header = json.loads(text)
    except RecursionError:
        raise ModelFileError(f"{path}: header.json nests too deeply") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ModelFileError(f"{path}: not a {FORMAT} file")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ModelFileError(
            f"{path}: format version {version!r} is not one this library reads (1..{VERSION})"
        )
    if not isinstance(header.get("arrays"), dict):
        raise ModelFileError(f"{path}: header.json has no arrays table")
    return header


def _declared(name: str, info: Any, path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and byte size an array's header entry declares, checked for sense."""
    if not isinstance(info, dict):
        raise ModelFileError(f"{path}: header entry of {name} is not a table")
    shape, dtype_name = info.get("shape"), info.get("dtype", "float64")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape) or len(shape) > 8:
        raise ModelFileError(f"{path}: array {name} declares shape {shape!r} (not a list of sizes)")
    if dtype_name not in _DTYPES:
        raise ModelFileError(f"{path}: array {name} declares dtype {dtype_name!r} (float32 or float64 only)")
    dtype = _DTYPES[dtype_name]
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=object))
    return tuple(shape), dtype, nbytes


def _npy_prefix(f: IO[bytes], name: str, path: Path) -> tuple[bytes, tuple[int, ...], np.dtype]:
    """Read and parse a ``.npy`` member's own header (bounded), returning its bytes, shape and dtype."""
    lead = f.read(10)
    if len(lead) < 10 or lead[:6] != b"\x93NUMPY":
        raise ModelFileError(f"{path}: {name} is not a .npy array")
    if lead[6] == 1:
        (hlen,), head = struct.unpack("<H", lead[8:10]), lead
    elif lead[6] in (2, 3):
        more = f.read(2)
        (hlen,), head = struct.unpack("<I", lead[8:10] + more), lead + more
    else:
        raise ModelFileError(f"{path}: {name} has .npy version {lead[6]}")
    if hlen > 65536:
        raise ModelFileError(f"{path}: {name} has a .npy header of {hlen} bytes")
    text = f.read(hlen)
    try:
        d = ast.literal_eval(text.decode("latin1"))
        shape, dtype = tuple(d["shape"]), np.dtype(d["descr"])
        if d["fortran_order"] or not all(type(n) is int for n in shape):
            raise ValueError("not a C-ordered array")
    except (ValueError, SyntaxError, TypeError, KeyError, MemoryError, RecursionError) as exc:
        raise ModelFileError(f"{path}: {name} has an unreadable .npy header ({exc})") from None
    return head + text, shape, dtype


def _check_declarations(declared: dict[str, Any], path: Path) -> None:
    """Every array entry makes sense and together they fit ``MAX_ARRAY_BYTES`` (nothing read yet)."""
    budget = MAX_ARRAY_BYTES
    for name in sorted(declared):
        _, _, nbytes = _declared(name, declared[name], path)
        if nbytes > budget:
            raise ModelFileError(
                f"{path}: array {name} declares {nbytes} bytes; a model file holds at most {MAX_ARRAY_BYTES}"
            )
        budget -= nbytes


def _read_array(zf: zipfile.ZipFile, name: str, info: Any, path: Path, payload) -> np.ndarray:
    """One member, checked against its (already checked) declaration before its data is read, then read
    in chunks that feed its own checksum and the file's ``payload`` one."""
    shape, dtype, nbytes = _declared(name, info, path)
    entry = zf.getinfo(name)
    with zf.open(entry) as f:
        prefix, npy_shape, npy_dtype = _npy_prefix(f, name, path)
        if npy_shape != shape or npy_dtype != dtype:
            raise ModelFileError(
                f"{path}: array {name} is {npy_shape} {npy_dtype}, header says {list(shape)} {dtype}"
            )
        if entry.file_size != len(prefix) + nbytes:
            raise ModelFileError(
                f"{path}: {name} holds {entry.file_size} bytes, its shape needs {len(prefix) + nbytes}"
            )
        digest = hashlib.sha256(prefix)
        payload.update(prefix)
        out = np.empty(shape, dtype=dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        done = 0
        while done < nbytes:
            n = f.readinto(view[done : done + _CHUNK])
            if not n:
                raise ModelFileError(f"{path}: {name} ends after {done} of {nbytes} bytes")
            digest.update(view[done : done + n])
            payload.update(view[done : done + n])
            done += n
    if digest.hexdigest() != info.get("sha256"):
        raise ModelFileError(f"{path}: checksum mismatch in {name} (the file is corrupted)")
    return out


def _read(
    path: Path, check: Callable[[dict[str, Any]], None]
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify everything in the file; ``check(header)`` runs before any array is read. Raise
    ``ModelFileError`` naming the first problem."""
    try:
        with open_regular(path, "model file") as file, zipfile.ZipFile(file) as zf:
            header = _read_header(zf, path)
            declared, payload, arrays = header["arrays"], hashlib.sha256(), {}
            _check_declarations(declared, path)
            check(header)
            for name in sorted(declared):
                arrays[name.removesuffix(".npy")] = _read_array(zf, name, declared[name], path, payload)
        if payload.hexdigest() != header.get("payload_sha256"):
            raise ModelFileError(f"{path}: payload checksum mismatch (the file is corrupted)")
    except ModelFileError:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: corrupted header.json ({exc})") from None
    except (
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,
        EOFError,
        KeyError,
        TypeError,
        ValueError,
        MemoryError,
        RecursionError,
    ) as exc:
        raise ModelFileError(f"{path}: truncated or corrupted model file ({exc})") from None
    except NotAFileError as exc:
        raise ModelFileError(str(exc)) from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
            raise
        raise ModelFileError(f"{path}: truncated or corrupted model file ({exc})") from None
    return header, arrays


def load(
    path: str | os.PathLike[str], backend: str | Backend | None = None, *, kind: str | None = None
) -> Any:
    """Rebuild a saved model; ``kind`` (``"sequential"``, ``"dbn"``) refuses a file holding another kind.

    A ``Sequential`` is built on ``backend`` (default: the kind of backend it was saved from) with its
    weights, non-trainable state, training counters, ``model.metadata`` and, when the file holds it, the
    optimizer state, so ``predict`` matches the saved model and ``fit`` continues where it stopped (with a
    fresh optimizer when the file was saved without ``optimizer=True``); arrays are converted to the
    backend's dtype. Other kinds are rebuilt by their class's ``from_saved`` as host float64 models
    (``backend`` unused: they take one per call).
    """
    path = Path(path)

    def check(header: dict[str, Any]) -> None:
        stored = header.get("kind", "sequential")
        if kind is not None and stored != kind:
            raise ModelFileError(f"{path}: holds a {stored!r} model, not a {kind!r} one")
        if stored == "sequential":
            _check_sizes(header, path)

    header, arrays = _read(path, check)
    stored = header.get("kind", "sequential")  # versions 1 and 2 held only Sequential models
    if stored != "sequential":
        cls = MODEL_KINDS.get(stored) if isinstance(stored, str) else None
        if cls is None:
            raise ModelFileError(f"{path}: model kind {stored!r} is not one this library reads")
        try:
            model = cls.from_saved(header["architecture"], arrays, header["training"])
            model.metadata = header["metadata"]
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise ModelFileError(f"{path}: the stored {stored} model does not rebuild: {exc}") from None
        return model
    return _load_sequential(path, header, arrays, backend)


def _check_sizes(header: dict[str, Any], path: Path) -> None:
    """The arrays a ``Sequential`` of the stored architecture holds, against those the header declares,
    before any array is read or any layer built: a small file declaring a huge layer is refused here."""
    try:
        arch, training = header["architecture"], header["training"]
        sizes = model_sizes(arch["layers"], arch["input_shape"], arch["optimizer"])
        with_slots = training.get("optimizer_state", True)  # version 1 files always hold the slots
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, RecursionError) as exc:
        raise ModelFileError(f"{path}: the stored architecture does not rebuild: {exc}") from None
    if sizes.constants > MAX_CONSTANT_ELEMENTS:
        raise ModelFileError(
            f"{path}: the architecture's layers would build {sizes.constants} constant elements (DFT bases, "
            f"positional tables; at most {MAX_CONSTANT_ELEMENTS})"
        )
    needed = {"params.npy": [sizes.params], "state.npy": [sizes.state]}
    if with_slots:
        needed |= {f"optimizer_slot{k}.npy": [sizes.params] for k in range(sizes.slots)}
    declared = header["arrays"]
    if set(declared) != set(needed):
        odd = sorted(set(declared) ^ set(needed))
        raise ModelFileError(f"{path}: arrays {odd} missing or unexpected for the stored architecture")
    for name, shape in needed.items():
        entry = declared[name]
        got = entry.get("shape") if isinstance(entry, dict) else entry
        if got != shape:
            raise ModelFileError(
                f"{path}: array {name} is declared {got}, the stored architecture needs {shape}"
            )


def _load_sequential(path: Path, header: dict, arrays: dict[str, np.ndarray], backend) -> Sequential:
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
            if not training.get("optimizer_state", True):  # version 2 without optimizer=True
                arrays = {**model.export_arrays(), **arrays}  # a fresh model's zero slots
            model.import_arrays({k: a.astype(np.float64, copy=False) for k, a in arrays.items()})
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
