"""Parameter initialisers, drawn on the host from one seeded generator so a model's start is reproducible.

- ``seed_uniform``: the MQL5 library's ``(MathRand() + 1) / 32768 − 0.5`` with ``MathRand()`` uniform on
  0..32767, i.e. 32,768 evenly spaced values in ``(−0.5, 0.5]``; kept so seed networks can be replayed.
- ``xavier_uniform`` / ``xavier_normal`` (Glorot & Bengio 2010): variance ``2 / (fan_in + fan_out)``, suited
  to tanh and sigmoid.
- ``he_uniform`` / ``he_normal`` (He et al. 2015): variance ``2 / fan_in``, suited to the ReLU family.
- ``zeros`` / ``ones``: biases, batch-norm shift and scale, running statistics.
"""

from __future__ import annotations

import math

import numpy as np

from nn.layer import ParamSpec


def initial_values(spec: ParamSpec, rng: np.random.Generator) -> np.ndarray:
    """A float64 array of ``spec.shape`` drawn according to ``spec.init``."""
    shape, kind = spec.shape, spec.init
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "ones":
        return np.ones(shape)
    if kind == "seed_uniform":
        return (rng.integers(0, 32768, size=shape) + 1) / 32768.0 - 0.5
    if kind.startswith("xavier"):
        _need_fans(spec, both=True)
        var = 2.0 / (spec.fan_in + spec.fan_out)
    elif kind.startswith("he"):
        _need_fans(spec, both=False)
        var = 2.0 / spec.fan_in
    else:
        raise ValueError(f"parameter {spec.name!r}: unknown initialiser {kind!r}")
    if kind.endswith("uniform"):
        limit = math.sqrt(3.0 * var)  # U(−a, a) has variance a²/3
        return rng.uniform(-limit, limit, size=shape)
    return rng.normal(0.0, math.sqrt(var), size=shape)


def _need_fans(spec: ParamSpec, both: bool) -> None:
    if spec.fan_in < 1 or (both and spec.fan_out < 1):
        raise ValueError(
            f"parameter {spec.name!r}: initialiser {spec.init!r} needs fan_in/fan_out in its ParamSpec"
        )
