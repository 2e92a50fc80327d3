"""The two ways to reach a MetaTrader 5 terminal, behind one ``call(name, *args)``.

``NativeLink`` calls the official ``MetaTrader5`` package in this process (Windows). ``BridgeLink`` calls
it through an RPyC classic server running in the terminal's own Python (Linux, under Wine — what
mt5linux does, without its docker requirement).

Results cross as plain values, never as RPyC netrefs: the terminal side turns each answer into nested
tuples of built-in scalars (arrays as dtype + bytes, result records as field/value pairs) with
``flatten``, and this side rebuilds numpy arrays and named tuples with ``unflatten``. Only such tuples
travel, so neither side needs the other's numpy version or the ``MetaTrader5`` result classes, and no
pickle is involved. ``flatten`` and ``call_flat`` are plain, self-contained functions so that the same
source runs on both sides (sent once over the bridge with ``conn.execute``).

Every call is bounded: the bridge through RPyC's ``sync_request_timeout`` plus a deadline on every read
of the socket and a cap on frame sizes (``datafeeds.terminal_wire``; the connection handshake included),
the native package by running the call in a worker thread and giving up waiting after ``timeout``
seconds.

Security: RPyC classic mode executes arbitrary code on the server. Bind it to 127.0.0.1 and reach it
from another machine only through an SSH tunnel.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from collections import namedtuple
from typing import Any

import numpy as np

from datafeeds.terminal_errors import TerminalConnectionError, TerminalError, TerminalTimeoutError

log = logging.getLogger(__name__)

MODULE = "MetaTrader5"


def flatten(value):
    """Turn an API answer into tagged tuples of built-in scalars (runs on the terminal side)."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return ("v", value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return flatten(value.item())
    if hasattr(value, "dtype") and hasattr(value, "tobytes"):
        descr = tuple(tuple(str(part) for part in field) for field in value.dtype.descr)
        return ("a", descr, len(value), value.tobytes())
    if hasattr(value, "_asdict"):
        fields = tuple((str(k), flatten(v)) for k, v in value._asdict().items())
        return ("r", type(value).__name__, fields)
    if isinstance(value, (tuple, list)):
        return ("t", tuple(flatten(item) for item in value))
    if isinstance(value, dict):
        return ("d", tuple((str(k), flatten(v)) for k, v in value.items()))
    for base in (bool, int, float, str, bytes):
        if isinstance(value, base):
            return ("v", base(value))
    return ("v", str(value))


def call_flat(module_name, name, args, kwargs):
    """Call ``module_name.name(*args, **kwargs)``; return ``(flat answer, last_error or None)``.

    ``last_error()`` is read right after a ``None``/``False`` answer, in the same place, so no other
    call can overwrite it in between (runs on the terminal side).
    """
    import importlib

    def real(value):  # a dict crosses as ("\x00dict", pairs): an RPyC proxy is no dict to the C package
        if type(value) is tuple and len(value) == 2 and value[0] == "\x00dict":
            return {k: real(v) for k, v in value[1]}
        return value

    api = importlib.import_module(module_name)
    answer = getattr(api, name)(*map(real, args), **{k: real(v) for k, v in kwargs})
    error = None
    if answer is None or answer is False:
        code, message = api.last_error()
        error = (int(code), str(message))
    return flatten(answer), error


_REMOTE_SOURCE = inspect.getsource(flatten) + "\n" + inspect.getsource(call_flat)
_RECORD_TYPES: dict[tuple[str, tuple[str, ...]], type] = {}


def unflatten(flat) -> Any:
    """Rebuild numpy arrays, named tuples, tuples and dicts from ``flatten``'s output."""
    tag = flat[0]
    if tag == "v":
        return flat[1]
    if tag == "a":
        _, descr, length, raw = flat
        dtype = np.dtype([tuple(field) for field in descr])
        if len(raw) != length * dtype.itemsize:
            raise TerminalError(f"terminal sent {len(raw)} bytes for {length} records of {dtype}")
        return np.frombuffer(raw, dtype=dtype).copy()
    if tag == "r":
        _, type_name, fields = flat
        names = tuple(k for k, _ in fields)
        cls = _RECORD_TYPES.get((type_name, names))
        if cls is None:
            cls = _RECORD_TYPES.setdefault((type_name, names), namedtuple(type_name, names))
        return cls(*(unflatten(v) for _, v in fields))
    if tag == "t":
        return tuple(unflatten(item) for item in flat[1])
    if tag == "d":
        return {k: unflatten(v) for k, v in flat[1]}
    raise TerminalError(f"terminal sent an answer neuronet cannot read (tag {tag!r})")


def read_answer(flat, error, where: str, name: str) -> tuple[Any, tuple[int, str] | None]:
    """``unflatten`` an answer and check the ``last_error`` pair: anything else than what ``call_flat``
    makes (an object array, nesting past Python's limit, a malformed error) is a ``TerminalError``."""
    try:
        answer = unflatten(flat)
        if error is not None:
            code, message = error
            error = (int(code), str(message))
    except (ValueError, TypeError, IndexError, KeyError, RecursionError, MemoryError) as exc:
        raise TerminalError(
            f"MetaTrader 5 {name}() at {where} sent an answer neuronet cannot read "
            f"({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    return answer, error


def _plain(value):
    """Arguments cross as built-in types (an IntEnum or numpy integer would travel as a netref, and so
    would a dict, which the official package's ``order_send`` refuses: it wants a real dict)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, dict):  # a trade request: rebuilt as a real dict by ``call_flat`` on the far side
        return ("\x00dict", tuple((str(k), _plain(v)) for k, v in value.items()))
    return value


# Held while a call into the in-process package runs, including one whose caller stopped waiting: the
# package keeps one IPC session per process, so nothing may call it while an earlier call still hangs.
_NATIVE_BUSY = threading.Lock()
# Open NativeLinks of this process: they share the package's one IPC session, which the last one ends (a
# link dropped without close() stops counting once it is garbage).
_NATIVE_OPEN: weakref.WeakSet[NativeLink] = weakref.WeakSet()
_NATIVE_OPEN_LOCK = threading.Lock()


class NativeLink:
    """The official package in this process; each call runs in a worker thread so it can be bounded."""

    def __init__(self, timeout: float, module_name: str = MODULE) -> None:
        self.timeout = timeout
        self.module_name = module_name
        self.where = "local"
        with _NATIVE_OPEN_LOCK:
            _NATIVE_OPEN.add(self)

    def call(self, name: str, *args, **kwargs) -> tuple[Any, tuple[int, str] | None]:
        if not _NATIVE_BUSY.acquire(timeout=self.timeout):
            raise TerminalTimeoutError(
                f"an earlier MetaTrader 5 call has not returned after {self.timeout:g} s more; "
                "check the terminal, or restart Python",
                transient=True,
            )
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["answer"] = call_flat(
                    self.module_name,
                    name,
                    tuple(map(_plain, args)),
                    tuple((k, _plain(v)) for k, v in kwargs.items()),
                )
            except BaseException as exc:  # handed to the waiting thread below
                box["error"] = exc
            finally:
                _NATIVE_BUSY.release()

        worker = threading.Thread(target=run, name=f"mt5-{name}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise TerminalTimeoutError(f"MetaTrader 5 {name}() did not return within {self.timeout:g} s")
        if "error" in box:
            raise TerminalError(f"MetaTrader 5 {name}() raised {type(box['error']).__name__}: {box['error']}")
        flat, error = box["answer"]
        return read_answer(flat, error, self.where, name)

    def close(self) -> None:
        """End the package's session with ``shutdown()`` if no other link of this process still uses it."""
        with _NATIVE_OPEN_LOCK:
            if self not in _NATIVE_OPEN:
                return
            _NATIVE_OPEN.discard(self)
            last = not _NATIVE_OPEN
        if last:
            try:
                self.call("shutdown")
            except TerminalError:
                log.debug("shutdown() failed on a closing link", exc_info=True)


def _refused_message(host: str, port: int, reason: str) -> str:
    import rpyc

    return (
        f"cannot reach the MetaTrader 5 bridge at {host}:{port} ({reason}); start the RPyC classic server in "
        "the Python that has MetaTrader5 installed (under Wine: wine python -m pip install MetaTrader5 "
        f'rpyc=={rpyc.__version__.split(".")[0]}.*, then wine python -c "from rpyc.cli.rpyc_classic import '
        f"main; main()\" --host 127.0.0.1 --port {port}); RPyC's major version must match on both sides"
    )


class BridgeLink:
    """The package on the other side of an RPyC classic connection (loopback or an SSH tunnel)."""

    def __init__(self, host: str, port: int, timeout: float, connect_timeout: float) -> None:
        import rpyc
        from rpyc.core.service import MasterService
        from rpyc.utils.factory import connect_channel

        from datafeeds import terminal_wire

        self.where = f"{host}:{port}"
        self.timeout = timeout
        try:
            self._stream = terminal_wire.connect(host, port, connect_timeout)
        except ConnectionRefusedError:
            raise TerminalConnectionError(_refused_message(host, port, "connection refused")) from None
        except TimeoutError:
            raise TerminalConnectionError(
                _refused_message(host, port, f"no answer within {connect_timeout:g} s")
            ) from None
        except OSError as exc:
            raise TerminalConnectionError(_refused_message(host, port, str(exc))) from None
        self._stream.deadline = time.monotonic() + timeout  # the whole handshake is one bounded call
        try:
            # MasterService drives the server's classic service without exposing this process to it.
            channel = terminal_wire.BoundedChannel(self._stream)
            self.conn = connect_channel(channel, MasterService, config={"sync_request_timeout": timeout})
            self.conn.execute(_REMOTE_SOURCE)
            self._call = self.conn.namespace["call_flat"]
        except TimeoutError:
            self._stream.close()
            raise TerminalTimeoutError(
                f"the server at {self.where} accepted the connection but did not complete the RPyC "
                f"handshake within {timeout:g} s; is it an RPyC classic server with the same major version "
                f"as here ({rpyc.__version__})?"
            ) from None
        except Exception as exc:
            self._stream.close()
            raise TerminalConnectionError(
                f"the server at {self.where} does not speak RPyC classic ({type(exc).__name__}: {exc}); "
                f"check that it is an RPyC classic server and that RPyC's major version matches "
                f"({rpyc.__version__} here)"
            ) from None

    def call(self, name: str, *args, **kwargs) -> tuple[Any, tuple[int, str] | None]:
        from datafeeds.terminal_wire import FrameError

        self._stream.deadline = time.monotonic() + self.timeout
        try:
            flat, error = self._call(
                MODULE, name, tuple(map(_plain, args)), tuple((k, _plain(v)) for k, v in kwargs.items())
            )
        except TimeoutError:
            self.close()  # a late answer must not be read as the answer to the next call
            raise TerminalTimeoutError(
                f"MetaTrader 5 {name}() over the bridge at {self.where} did not answer within "
                f"{self.timeout:g} s"
            ) from None
        except ModuleNotFoundError:
            raise TerminalConnectionError(
                f"the bridge at {self.where} runs a Python without the MetaTrader5 package; install it "
                "there (wine python -m pip install MetaTrader5)"
            ) from None
        except FrameError as exc:
            self.close()
            raise TerminalConnectionError(
                f"the bridge at {self.where} sent an answer to {name}() that is not RPyC ({exc})"
            ) from None
        except (EOFError, ConnectionError) as exc:
            self.close()
            raise TerminalConnectionError(
                f"the connection to the bridge at {self.where} dropped during {name}() "
                f"({type(exc).__name__})",
                transient=True,
            ) from None
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TerminalError(
                f"MetaTrader 5 {name}() raised on the bridge: {type(exc).__name__}: {first}"
            ) from None
        return read_answer(flat, error, self.where, name)

    def close(self) -> None:
        self._stream.deadline = time.monotonic() + min(self.timeout, 1.0)  # a close waits for no peer
        try:
            self.conn.close()
        except Exception:  # closing a dead connection has nothing left to report
            log.debug("closing the bridge connection to %s failed", self.where, exc_info=True)
