"""The parameter space of an optimisation, from MetaTrader-style specs such as ``fast=5:50:5``.

Syntax of one ``NAME=SPEC``:
- ``start:stop:step`` — an inclusive range, as the Strategy Tester's start/step/stop (``start:stop`` steps
  by 1 for integers); numeric parameters only;
- ``a,b,c`` — a list of values; for text parameters whose values themselves hold commas (FractalEA's
  ``hidden="500,250"``) separate the choices with ``|`` instead: ``hidden=500,250|200,100``;
- a single value — a fixed parameter, passed to every pass and not searched (``fixed=`` of
  ``parse_space``, the command's ``--set``, takes a value verbatim, commas included).

Values are converted to the type of the EA's class-attribute default through the EA's own parameter
resolution, so a misspelt name gets the same "did you mean" as ``neuronet backtest -p``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna.distributions as od

from backtests.optimize.errors import OptimizeError
from strategies.base import ExpertAdvisor

MAX_GRID = 10_000_000  # a grid this large is a typo (a step of 0.0001), not a plan


class SpaceError(OptimizeError):
    """A parameter spec that cannot be read; the message names the parameter and the spec."""


@dataclass(frozen=True)
class Dimension:
    """One searched parameter: its values in order and how Optuna should sample it."""

    name: str
    values: tuple
    kind: str  # "int" | "float" (ranges: ordered, stepped) or "choice" (lists)

    def distribution(self) -> od.BaseDistribution:
        if self.kind == "int":
            step = self.values[1] - self.values[0] if len(self.values) > 1 else 1
            return od.IntDistribution(self.values[0], self.values[-1], step=step)
        if self.kind == "float":
            step = self.values[1] - self.values[0] if len(self.values) > 1 else None
            return od.FloatDistribution(self.values[0], self.values[-1], step=step)
        return od.CategoricalDistribution(self.values)


@dataclass(frozen=True)
class ParamSpace:
    """Searched dimensions plus fixed parameters of one EA class."""

    ea: type[ExpertAdvisor]
    dimensions: tuple[Dimension, ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    @property
    def grid_size(self) -> int:
        return math.prod(len(d.values) for d in self.dimensions)

    def grid(self) -> dict[str, list]:
        """Each searched parameter's values, in order."""
        return {d.name: list(d.values) for d in self.dimensions}

    def point(self, index: int) -> dict[str, Any]:
        """Grid point ``index`` (0-based): the dimensions in their given order, the last one varying
        fastest (``itertools.product`` order, MetaTrader's pass numbering of a complete search)."""
        values = {}
        for d in reversed(self.dimensions):
            index, k = divmod(index, len(d.values))
            values[d.name] = d.values[k]
        return {d.name: values[d.name] for d in self.dimensions}

    def distributions(self) -> dict[str, od.BaseDistribution]:
        return {d.name: d.distribution() for d in self.dimensions}

    def describe(self) -> dict:
        """JSON-ready form: part of the study's identity, so a changed space never resumes an old study."""
        return {
            "ea": self.ea.__name__,
            "space": {d.name: [_plain(v) for v in d.values] for d in self.dimensions},
            "fixed": {k: _plain(v) for k, v in sorted(self.fixed.items())},
        }


def parse_space(
    ea: type[ExpertAdvisor],
    specs: Mapping[str, Any] | Iterable[str],
    fixed: Mapping[str, Any] | None = None,
) -> ParamSpace:
    """Read ``{"fast": "5:50:5"}`` or ``["fast=5:50:5", ...]``; Python lists/ranges are taken as given.

    ``fixed``: parameters every pass gets, taken verbatim (converted to the default's type).
    """
    pairs = _pairs(specs)
    defaults = ea.param_defaults()
    for name in pairs:
        if name not in defaults:
            _typed(ea, name, None, pairs[name])  # the EA's own "did you mean"
    fixed = {k: _typed(ea, k, v, v) for k, v in (fixed or {}).items()}
    both = sorted(set(fixed) & set(pairs))
    if both:
        raise SpaceError(f"{', '.join(both)}: both searched and fixed; give each parameter once")
    dims: list[Dimension] = []
    for name, spec in pairs.items():
        values, kind = _values(ea, name, spec, defaults[name])
        if len(values) == 1 and kind != "list-given":
            fixed[name] = values[0]
            continue
        if len(set(values)) != len(values):
            raise SpaceError(f"--param {name}={spec}: a value is listed twice")
        dims.append(Dimension(name, tuple(values), kind if kind in ("int", "float") else "choice"))
    if not dims:
        raise SpaceError("nothing to optimise: give a parameter a range (a:b:step) or a list (a,b)")
    space = ParamSpace(ea, tuple(dims), fixed)
    if space.grid_size > MAX_GRID:
        raise SpaceError(f"the grid has {space.grid_size:,} passes (limit {MAX_GRID:,}); use coarser steps")
    return space


def _pairs(specs: Mapping[str, Any] | Iterable[str]) -> dict[str, Any]:
    if isinstance(specs, Mapping):
        return {str(k).strip(): v for k, v in specs.items()}
    out: dict[str, Any] = {}
    for item in specs:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SpaceError(f"--param {item!r}: expected NAME=SPEC like fast=5:50:5 or hidden=200,500")
        if key.strip() in out:
            raise SpaceError(f"--param {key.strip()} is given twice")
        out[key.strip()] = value.strip()
    return out


def _values(ea: type[ExpertAdvisor], name: str, spec: Any, default: Any) -> tuple[list, str]:
    if not isinstance(spec, str):  # from Python: a list, range or tuple of values, or one value
        if isinstance(spec, (list, range)) or (isinstance(spec, tuple) and not isinstance(default, tuple)):
            return [_typed(ea, name, v, spec) for v in spec], "list-given"
        return [_typed(ea, name, spec, spec)], "fixed"
    numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
    if ":" in spec:
        if not numeric:
            raise SpaceError(
                f"--param {name}={spec}: a range needs a numeric parameter ({name} is "
                f"{type(default).__name__}); list the values instead: {name}=a,b"
            )
        return _range(ea, name, spec, isinstance(default, int))
    sep = "|" if "|" in spec else ","
    parts = [p.strip() for p in spec.split(sep)]
    if any(not p for p in parts):
        raise SpaceError(f"--param {name}={spec}: an empty value in the list")
    values = [_typed(ea, name, p, spec) for p in parts]
    return values, ("list" if len(values) > 1 else "fixed")


def _range(ea: type[ExpertAdvisor], name: str, spec: str, integer: bool) -> tuple[list, str]:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise SpaceError(f"--param {name}={spec}: a range is start:stop[:step], e.g. 5:50:5")
    try:
        start, stop = float(parts[0]), float(parts[1])
        step = float(parts[2]) if len(parts) == 3 else (1.0 if integer else None)
    except ValueError:
        raise SpaceError(f"--param {name}={spec}: start, stop and step must be numbers") from None
    if step is None:
        raise SpaceError(f"--param {name}={spec}: a float range needs a step, e.g. {start}:{stop}:0.1")
    if not all(math.isfinite(v) for v in (start, stop, step)) or step <= 0 or stop < start:
        raise SpaceError(f"--param {name}={spec}: need start <= stop and a positive step")
    if integer and not all(float(v).is_integer() for v in (start, stop, step)):
        raise SpaceError(f"--param {name}={spec}: {name} is an integer parameter; use whole numbers")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > MAX_GRID:
        raise SpaceError(f"--param {name}={spec}: {count:,} values; use a coarser step")
    digits = max(0, -math.floor(math.log10(step))) + 6
    raw = [start + i * step for i in range(count)]
    values = [round(v) if integer else round(v, digits) for v in raw]
    return [_typed(ea, name, v, spec) for v in values], ("int" if integer else "float")


def _typed(ea: type[ExpertAdvisor], name: str, value: Any, spec: Any) -> Any:
    try:
        return ea.resolve_params({name: value})[name]
    except ValueError as exc:
        raise SpaceError(f"--param {name}={spec}: {exc}") from None


def _plain(value: Any) -> Any:
    """JSON-ready value (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value
