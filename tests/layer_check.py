"""Helpers shared by the layer tests (``tests`` is on the test path through pyproject's ``pythonpath``;
test modules cannot import a conftest)."""

from __future__ import annotations

import numpy as np

from nn.ops_numpy import NumpyBackend


def bind_random(layer, input_shape, rng, backend=None, scale=0.5) -> tuple[np.ndarray, np.ndarray]:
    """Build ``layer`` for ``input_shape`` and bind random parameters and zero gradients held in two flat
    float64 buffers (on ``backend``, default the NumPy reference); returns ``(flat_params, flat_grads)``
    so a finite-difference check can perturb and read them in place."""
    be = backend or NumpyBackend()
    layer.build(tuple(input_shape))
    specs = layer.param_specs()
    total = sum(s.size for s in specs)
    flat_p, flat_g = rng.normal(scale=scale, size=total), np.zeros(total)
    params, grads, off = {}, {}, 0
    for s in specs:
        params[s.name], grads[s.name] = be.view(flat_p, off, s.shape), be.view(flat_g, off, s.shape)
        off += s.size
    layer.bind(be, params, grads, {})
    return flat_p, flat_g
