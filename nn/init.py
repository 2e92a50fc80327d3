"""Parameter initialisers, drawn on the host from one seeded generator so a model's start is reproducible.

- ``seed_uniform``: the MQL5 library's ``(MathRand() + 1) / 32768 − 0.5`` with ``MathRand()`` uniform on
  0..32767, i.e. 32,768 evenly spaced values in ``(−0.5, 0.5]``; kept so seed networks can be replayed.
- ``xavier_uniform`` / ``xavier_normal`` (Glorot & Bengio 2010): variance ``2 / (fan_in + fan_out)``, suited
  to tanh and sigmoid.
- ``he_uniform`` / ``he_normal`` (He et al. 2015): variance ``2 / fan_in``, suited to the ReLU family.
- ``torch_uniform``: PyTorch's default for ``nn.Linear``/``nn.Conv1d`` weights AND biases, ``U(−1/√fan_in,
  1/√fan_in)`` (its ``kaiming_uniform_(a=√5)`` reduces to that bound; the bias bound is the same), so the
  published PatchTST/ATFNet configurations, tuned with those defaults, start where they started.
- ``torch_complex_bias``: the complex bias ``(b_r − b_i) + i(b_r + b_i)`` that the official ATFNet
  ``ComplexLinear`` forms from its two real ``nn.Linear`` biases, each ``U(±1/√fan_in)``; ``(..., 2)`` shapes.
- ``complex_unit``: ``(1 + i)/√2`` everywhere, the official ATFNet ``ComplexLN`` weight; ``(..., 2)`` shapes.
- ``zeros`` / ``ones``: biases, batch-norm shift and scale, running statistics.

``INIT_SCHEMES`` name the two families a transformer layer can start from (``init=`` on ``nn.attention``,
``nn.complex`` and ``nn.atfnet`` layers): ``"xavier"`` (Xavier-uniform weights, zero biases, complex layer
norm weight ``1 + i``) and ``"torch"`` (the PyTorch modules' defaults above, those of the official code).
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
    if kind == "complex_unit":
        return np.full(shape, math.sqrt(0.5))
    if kind in ("torch_uniform", "torch_complex_bias"):
        _need_fans(spec, both=False)
        bound = 1.0 / math.sqrt(spec.fan_in)
        if kind == "torch_uniform":
            return rng.uniform(-bound, bound, size=shape)
        b_re, b_im = rng.uniform(-bound, bound, size=(2, *shape[:-1]))
        return np.stack([b_re - b_im, b_re + b_im], axis=-1)
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


INIT_SCHEMES = ("xavier", "torch")


def check_scheme(layer: str, init: str) -> str:
    """``init`` if it names an ``INIT_SCHEMES`` family, else a ValueError naming the layer."""
    if init not in INIT_SCHEMES:
        raise ValueError(f"{layer}: init must be one of {', '.join(INIT_SCHEMES)}, got {init!r}")
    return init


def weight_spec(name: str, shape: tuple[int, ...], init: str, fan_in: int, fan_out: int) -> ParamSpec:
    """A real (or complex: trailing 2) weight under the ``init`` scheme; ``fan_in`` counts real inputs
    for ``"xavier"`` and complex inputs (one ``nn.Linear`` of the pair) for ``"torch"``."""
    kind = "torch_uniform" if init == "torch" else "xavier_uniform"
    return ParamSpec(name, shape, kind, fan_in, fan_out)


def bias_spec(name: str, shape: tuple[int, ...], init: str, fan_in: int, complex_: bool = False) -> ParamSpec:
    """A bias under the ``init`` scheme: zeros (``"xavier"``) or PyTorch's ``U(±1/√fan_in)`` (``"torch"``;
    ``complex_``: the official ``ComplexLinear`` bias built from two such draws)."""
    if init != "torch":
        return ParamSpec(name, shape, "zeros")
    return ParamSpec(name, shape, "torch_complex_bias" if complex_ else "torch_uniform", fan_in)


def _need_fans(spec: ParamSpec, both: bool) -> None:
    if spec.fan_in < 1 or (both and spec.fan_out < 1):
        raise ValueError(
            f"parameter {spec.name!r}: initialiser {spec.init!r} needs fan_in/fan_out in its ParamSpec"
        )
