"""How a ``Sequential`` model holds its numbers, worked out from its layers' shapes alone: the layers a list
of descriptions stands for (``expand_layers``), every layer's output shape and parameter and state arrays
(``layer_shapes``), their aligned offsets in one flat buffer (``Layout``: views for the layers, and the
compact, padding-free form that files store), the size check made before anything is allocated
(``check_size``), and the element counts a model file is checked against before it is built
(``model_sizes``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nn.backend import Backend, Tensor
from nn.errors import NNConfigError
from nn.layer import Layer, ParamSpec
from nn.layers import from_config
from nn.optim import optimizer_from_config


def aligned(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


class Layout:
    """Offsets of every ``(layer index, ParamSpec)`` in a flat buffer, each aligned."""

    def __init__(self, entries: list[tuple[int, ParamSpec]], alignment: int) -> None:
        self.entries, self.offsets, cursor = entries, [], 0
        for _, spec in entries:
            offset = aligned(cursor, alignment)
            self.offsets.append(offset)
            cursor = offset + spec.size
        self.size = max(aligned(cursor, alignment), alignment)  # never an empty device buffer
        self.compact_size = sum(spec.size for _, spec in entries)

    def views(self, backend: Backend, flat: Tensor, layer: int) -> dict[str, Tensor]:
        return {
            spec.name: backend.view(flat, off, spec.shape)
            for (i, spec), off in zip(self.entries, self.offsets, strict=True)
            if i == layer
        }

    def compact(self, padded: np.ndarray) -> np.ndarray:
        """Padded host copy -> the entries back to back (the backend-independent form that files store)."""
        parts = [padded[off : off + s.size] for (_, s), off in zip(self.entries, self.offsets, strict=True)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def pad(self, compact: np.ndarray) -> np.ndarray:
        out, cursor = np.zeros(self.size), 0
        for (_, spec), off in zip(self.entries, self.offsets, strict=True):
            out[off : off + spec.size] = compact[cursor : cursor + spec.size]
            cursor += spec.size
        return out


MAX_ELEMENTS = 2**31 - 1  # the kernels index a flat buffer with 32-bit integers


def check_size(params: int, state: int, slots: int, dtype: Any) -> None:
    """Refuse a model too large to hold before anything is allocated: the parameters, their gradients and
    the optimizer's slots must fit the kernels' 32-bit indices and the machine's memory (where it can be
    read), so a typo such as ``units=10**9`` is one line instead of a ``MemoryError`` or a swapping host."""
    if max(params, state) > MAX_ELEMENTS:
        raise NNConfigError(
            f"the model holds {max(params, state):,} values in one buffer, more than the {MAX_ELEMENTS:,} "
            "the kernels can index; make the layers smaller"
        )
    need = (params * (2 + slots) + state) * np.dtype(dtype).itemsize
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the index bound alone
        return
    if need > have:
        raise NNConfigError(
            f"the model needs {need / 2**30:.1f} GiB for its parameters, gradients and optimizer state, "
            f"more than this machine's {have / 2**30:.1f} GiB of memory; make the layers smaller"
        )


@dataclass(frozen=True)
class ModelSizes:
    """Element counts of what a model holds: its flat buffers and the constant tables its layers build."""

    params: int  # trainable parameters (compact, as files store them)
    state: int  # non-trainable state
    slots: int  # optimizer state buffers, each of ``params`` elements
    constants: int  # DFT bases, positional tables


def model_sizes(
    specs: Sequence[dict[str, Any]], input_shape: Sequence[int], optimizer: dict[str, Any] | str
) -> ModelSizes:
    """The sizes of the model ``Sequential.from_specs`` would build, from the layers' shapes alone: no
    buffer is allocated, so a model file can be checked against them before it is built. Raises
    ``ValueError`` naming the first layer that does not fit, as building would."""
    layers = expand_layers([layer_from_spec(i, spec) for i, spec in enumerate(specs)])
    _, params, states = layer_shapes(layers, checked_input_shape(input_shape))
    return ModelSizes(
        params=sum(s.size for _, s in params),
        state=sum(s.size for _, s in states),
        slots=optimizer_from_config(optimizer).slots,
        constants=sum(layer.constant_elements() for layer in layers),
    )


def layer_from_spec(i: int, spec: dict[str, Any]) -> Layer:
    try:
        return from_config(spec)
    except ValueError as exc:
        raise NNConfigError(f"layer spec {i}: {exc}") from None


def expand_layers(layers: Sequence[Layer]) -> list[Layer]:
    """The layers a list of descriptions stands for (a softmax dense is two layers)."""
    if not layers:
        raise NNConfigError("a Sequential model needs at least one layer")
    expanded: list[Layer] = []
    for layer in layers:
        if not isinstance(layer, Layer):
            raise NNConfigError(f"Sequential takes Layer objects (or use from_specs), got {layer!r}")
        expanded += layer.expand() if hasattr(layer, "expand") else [layer]
    return expanded


def checked_input_shape(input_shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(input_shape)
    if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise NNConfigError(f"input_shape must be positive integers, e.g. (240,), got {input_shape!r}")
    return shape


def layer_shapes(
    layers: list[Layer], input_shape: tuple[int, ...]
) -> tuple[tuple[int, ...], list[tuple[int, ParamSpec]], list[tuple[int, ParamSpec]]]:
    """Fix every layer's shapes in order: the output shape and the ``(layer index, spec)`` of every
    parameter and state array (``Layer.build`` only records shapes; nothing is allocated)."""
    shape = input_shape
    params: list[tuple[int, ParamSpec]] = []
    states: list[tuple[int, ParamSpec]] = []
    for i, layer in enumerate(layers):
        try:
            shape = tuple(layer.build(shape))
        except ValueError as exc:
            raise NNConfigError(f"layer {i} ({layer.type_name}): {exc}") from None
        params += [(i, s) for s in layer.param_specs()]
        states += [(i, s) for s in layer.state_specs()]
    return shape, params, states
