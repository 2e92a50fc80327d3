"""Indicators already proved causal, kept so that an optimisation pass does not prove them again.

An indicator is evaluated over the whole history and then recomputed on shorter prefixes to prove it does
not look ahead (``backtests.replay.causal_indicator``): about as much work as a fifth of an SMA pass's
replay, done again in every pass although most passes of a grid repeat an input another pass had (a
200-pass grid of two SMA periods has 30 distinct SMAs, not 400).

A proof is kept under everything its outcome depends on, so that a later identical request gets exactly
the values that request would have computed and checked:

- the function: its code, the values its closure holds, its defaults, and every global and builtin name
  its code reads, with the attributes it reads of the modules and classes among them; and the same of
  every Python function it reaches, by a global name, a module's or class's attribute or its closure (a
  helper's result depends on what the helper reads) (``fingerprint``). The functions of Python and of
  installed libraries count as pure and are known by identity, as builtins are, except those that read
  state by a name in a string (``getattr``, ``eval``, ``os.getenv``: ``_OPAQUE``) or a file by its path
  (``open``, ``numpy.load``, ``pandas.read_csv``, ``pathlib.Path``: what the file holds is not in the key);
- the bars: a digest of every column and bar time the function could read, with the candles' metadata
  (the content, not the frame's identity: a frame changed in place is a different input);
- the prefixes the proof recomputed (the run's probe points, drawn per run from its seed).

A function whose result may depend on anything else (a bound method of the EA, whose state differs from
pass to pass, such as a trained network; a closure over a list, an array or an object; a global that is
not a plain value, function, class or module) is not kept: it is evaluated and proved in every call, as
before. A failed proof is never kept, so a look-ahead is reported by every pass that meets it. What a hit
returns is the read-only values that passed the same check on the same bars, so a function that changes its
behaviour between calls against its contract (``ExpertAdvisor.indicator``: a pure function of its bars)
is at worst given its earlier, proved values, never unchecked ones.

The kept values are bounded (``BUDGET`` bytes and ``ENTRIES`` proofs, the least recently used dropped
first) and belong to the process: each optimisation worker keeps its own.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import io
import operator
import os
import pathlib
import shelve
import site
import sqlite3
import sys
import sysconfig
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import pandas as pd

from strategies.bars import COLUMNS, BarFeed

BUDGET = 128 * 2**20  # bytes of kept indicator values in one process
ENTRIES = 4096  # and proofs: each key holds the function's code and what it reads
_DEPTH = 4  # how deep closures over functions are followed before the function counts as not pure
_VALUES = (type(None), bool, int, str, bytes)
# NumPy's own functions, taken by identity as builtins are (``np.all`` dispatches to Python code)
_LIBRARY = types.BuiltinFunctionType | np.ufunc | type(np.all)
# functions that read state by a name or a path the code does not spell: a function calling one is not kept
_OPAQUE = frozenset(
    [vars(builtins)[name] for name in ("getattr", "vars", "globals", "locals", "eval", "exec", "compile")]
    + [vars(builtins)[name] for name in ("open", "__import__", "input")]
    # ``getattr`` under another name: ``attrgetter("period")(cfg)`` reads ``cfg.period``, a name the code
    # does not spell
    + [operator.attrgetter, operator.methodcaller]
    + [os.getenv, getattr(os, "getenvb", os.getenv)]  # the environment, read by a name in a string
    # files read by a path: what they hold is no part of the key (a signal file written again between two
    # runs of one process would be served the first file's values)
    + [np.load, np.loadtxt, np.genfromtxt, np.fromfile, np.memmap, io.open, io.FileIO, pathlib.Path]
    + [pathlib.PurePath, sqlite3.connect, shelve.open]
    + [getattr(pd, name) for name in dir(pd) if name.startswith("read_")]
)


# where installed libraries live: their modules and classes count as fixed, the user's are read further
_INSTALLED = tuple(
    {os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {os.path.join(site.getusersitepackages(), "")}  # ``pip install --user``
)


class _Unknown(Exception):
    """What a function reads cannot be told from its code and closure: it is not kept."""


def _value(v: Any, depth: int) -> Hashable:
    """A key of a plain value, or of a function held in a closure, equal only for the same value and type
    (``1``, ``1.0``, ``True`` and ``-0.0``, ``0.0`` differ)."""
    kind = type(v)
    if kind in _VALUES:
        return kind, v
    if kind is float:
        return kind, v.hex()
    if kind is complex:
        return kind, v.real.hex(), v.imag.hex()
    if isinstance(v, np.generic) and not isinstance(v, np.object_):
        return kind, v.dtype.str, v.tobytes()  # the unit of a date or time span is in its dtype
    if kind is tuple or kind is frozenset:
        items = (_value(x, depth) for x in v)
        return kind, (tuple(items) if kind is tuple else frozenset(items))
    if kind is types.FunctionType:
        return _function(v, depth)
    if kind is functools.partial:
        return fingerprint_of(v, depth + 1)
    raise _Unknown


def _names(code: types.CodeType) -> frozenset[str]:
    """Every global, builtin and attribute name ``code`` and the code nested in it (comprehensions,
    inner functions) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return frozenset(names)


_code_names = functools.lru_cache(maxsize=1024)(_names)


def _reference(v: Any, names: frozenset[str], depth: int) -> Hashable:
    """A key of what a name of the code or a cell of its closure refers to: a plain value by value; a
    module or class by identity, with the key of each attribute the code may read of it (``_read``); a
    builtin or one of NumPy's functions by identity; a Python function by its own fingerprint with the
    attributes the code may read of it. A helper is followed wherever it is reached: what it returns
    depends on the globals, closure and defaults *it* reads, which the caller's code does not name (a
    helper reading a global that the EA's ``on_init`` sets from its parameter would otherwise hand a
    later pass the values, or the passed proof, of an earlier one)."""
    if isinstance(v, type) and v in _OPAQUE:
        raise _Unknown
    if isinstance(v, types.ModuleType | type):
        return v, _read(v, names, depth)
    if type(v) is types.FunctionType:
        return _function(v, depth), _read(v, names, depth)
    if isinstance(v, _LIBRARY):
        if v in _OPAQUE:
            raise _Unknown
        return v
    return _value(v, depth)


def _function(v: types.FunctionType, depth: int) -> Hashable:
    """A Python function reached from an indicator: the user's by its fingerprint; one of Python's or of an
    installed library by identity, as builtins are (``pandas.concat`` is as pure as ``len``), except the
    few that read the environment (``_OPAQUE``)."""
    if v in _OPAQUE:
        raise _Unknown
    module = sys.modules.get(v.__module__ or "")
    if module is not None and _installed(module):
        return v
    return fingerprint_of(v, depth + 1)


def _read(v: Any, names: frozenset[str], depth: int) -> tuple:
    """``(name, key)`` of each attribute of ``v`` (a module, a class with its bases, a function's own
    attributes) whose name the code reads, each keyed by ``_attribute``."""
    spaces = [vars(c) for c in v.__mro__] if isinstance(v, type) else [vars(v)]
    read = []
    for name in sorted(names):
        for space in spaces:
            if name in space:
                read.append((name, _attribute(space[name], names, depth)))
                break
        else:
            if hasattr(type(v), name):
                # an attribute of its type: ``cfg.__dict__["period"]``, ``cfg.__getattribute__("period")``
                # read the namespace by a name in a string, which the code does not spell
                raise _Unknown
    return tuple(read)


def _attribute(v: Any, names: frozenset[str], depth: int) -> Hashable:
    """An attribute of a module, class or function: a Python function (a static method's too) by its
    fingerprint, since a module's helper reads its own globals; a module or class of the user's by
    identity with the attributes the code may read of it (``cfg.Settings.period``), an installed one, a
    builtin or one of NumPy's functions by identity; a class method, which reads its class's attributes
    under names its caller does not show, is not known."""
    if isinstance(v, staticmethod):
        v = v.__func__
    if type(v) is types.FunctionType:
        if depth >= _DEPTH:
            raise _Unknown
        return _function(v, depth), _read(v, names, depth + 1)  # and its own attributes: ``cfg.line.period``
    if isinstance(v, classmethod):
        raise _Unknown
    if isinstance(v, _LIBRARY | type) and v in _OPAQUE:
        raise _Unknown
    if isinstance(v, types.ModuleType | type) and not _installed(v):
        if depth >= _DEPTH:
            raise _Unknown
        return v, _read(v, names, depth + 1)
    if isinstance(v, types.ModuleType | type | _LIBRARY | property):
        return v
    return _value(v, depth)


def _installed(v: types.ModuleType | type) -> bool:
    """Whether a module or class comes with Python or an installed library (not the user's own code)."""
    module = v if isinstance(v, types.ModuleType) else sys.modules.get(v.__module__)
    if module is None:
        return False
    path = getattr(module, "__file__", None)
    return module.__name__ in sys.builtin_module_names if path is None else path.startswith(_INSTALLED)


def fingerprint_of(fn: Any, depth: int = 0) -> Hashable:
    """A key equal for two indicator functions only when they compute the same thing from the same bars;
    ``_Unknown`` when that cannot be told from the function."""
    if depth > _DEPTH:
        raise _Unknown
    if type(fn) is functools.partial:
        keywords = tuple(sorted((k, _value(v, depth)) for k, v in fn.keywords.items()))
        plain = type(fn.func) is types.FunctionType
        func = _function(fn.func, depth) if plain else fingerprint_of(fn.func, depth + 1)
        return "partial", func, _value(fn.args, depth), keywords
    if type(fn) is not types.FunctionType:
        raise _Unknown  # a bound method, a callable object: its state is not in its code
    code = fn.__code__
    try:
        contents = [cell.cell_contents for cell in fn.__closure__ or ()]
    except ValueError:  # an empty cell
        raise _Unknown from None
    names = _code_names(code)
    cells = tuple(_reference(v, names, depth) for v in contents)
    space, builtin = fn.__globals__, vars(builtins)
    refs = tuple(
        (name, _global(fn, space[name] if name in space else builtin[name], names, depth))
        for name in sorted(names)
        if name in space or name in builtin
    )
    kwdefaults = tuple(sorted((k, _value(v, depth)) for k, v in (fn.__kwdefaults__ or {}).items()))
    return code, cells, _value(fn.__defaults__ or (), depth), kwdefaults, refs


def _global(fn: types.FunctionType, v: Any, names: frozenset[str], depth: int) -> Hashable:
    """``_reference`` of a global, where a function that names itself (to read an attribute set on it)
    is keyed by those attributes rather than followed into itself."""
    if v is fn:
        return "itself", _read(fn, names, depth)
    return _reference(v, names, depth)


def fingerprint(fn: Callable) -> Hashable | None:
    """``fingerprint_of(fn)``, or None for a function whose result may depend on more than its code shows."""
    try:
        key = fingerprint_of(fn)
        hash(key)
    except (_Unknown, TypeError):
        return None
    return key


def digest(feed: BarFeed) -> Hashable | None:
    """What the bars of ``feed`` are, by content: every column, the bar times and the metadata."""
    meta = feed.meta
    try:
        hash(meta)
    except TypeError:
        return None
    h = hashlib.sha256()
    for name in COLUMNS:
        h.update(np.ascontiguousarray(feed.column(name)).data)
    h.update(np.ascontiguousarray(feed.time.asi8).data)
    return len(feed), str(feed.time.dtype), meta, h.digest()


def frozen(values: np.ndarray) -> np.ndarray:
    """``values`` in memory no one can write: an array over an immutable ``bytes`` (its write flag cannot be
    set again, not even through ``.base``), so values shared by every run of a process stay as proved."""
    return np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=values.dtype).reshape(values.shape)


class ProvenIndicators:
    """Indicator values proved causal, by function, bars and probe points (least recently used dropped
    first beyond ``budget`` bytes or ``entries`` proofs). Safe to share between threads (a Dask worker
    runs several tasks at once)."""

    def __init__(self, budget: int = BUDGET, entries: int = ENTRIES):
        self.budget, self.entries = budget, entries
        self.hits = 0
        self.misses = 0
        self._kept: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._feed: BarFeed | None = None  # the last feed digested, held so its identity stays its own
        self._digest: Hashable | None = None

    def proved(
        self,
        fn: Callable,
        feed: BarFeed,
        name: str,
        probes: list[int],
        prove: Callable[[Callable, BarFeed, str, list[int]], np.ndarray],
    ) -> np.ndarray:
        """``prove(fn, feed, name, probes)``, or its values from an identical earlier call: immutable either
        way (``frozen``), so the kept values are the ones handed out and a run's lines read them without a
        copy of their own (``strategies.bars.Line``)."""
        key = self._key(fn, feed, probes)
        if key is not None:
            with self._lock:
                kept = self._kept.get(key)
                if kept is not None:
                    self._kept.move_to_end(key)
                    self.hits += 1
                    return kept
                self.misses += 1
        values = frozen(prove(fn, feed, name, probes))
        if key is not None and values.nbytes <= self.budget // 4:
            with self._lock:
                if key not in self._kept:
                    self._kept[key] = values
                    self._size += values.nbytes
                while self._size > self.budget or len(self._kept) > self.entries:
                    _, dropped = self._kept.popitem(last=False)
                    self._size -= dropped.nbytes
        return values

    def _key(self, fn: Callable, feed: BarFeed, probes: list[int]) -> Hashable | None:
        code = fingerprint(fn)
        if code is None:
            return None
        with self._lock:
            # a run's feed is one object for all its indicators, and a backtest's feed never grows
            if feed is not self._feed or self._digest is None or self._digest[0] != len(feed):
                self._feed, self._digest = feed, digest(feed)
            data = self._digest
        if data is None:
            return None
        return code, data, tuple(probes)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._size = 0
            self._feed = self._digest = None


PROVEN = ProvenIndicators()
