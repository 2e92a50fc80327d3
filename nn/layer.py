"""The layer contract: how a layer declares its parameters, binds to storage, and runs both passes.

A model owns ONE flat parameter buffer, one flat gradient buffer of the same layout and the optimizer
state buffers; each layer receives views into them (``bind``). That makes an optimizer step a single kernel
launch over all parameters, and saving a model a single array.

Lifecycle: ``build(input_shape)`` (per-sample shapes, no batch axis) -> ``param_specs()``/``state_specs()``
-> the model allocates and initialises -> ``bind(backend, params, grads, state)`` -> ``forward``/``backward``
per batch. ``config()`` returns the layer's serialisable description (``{"type": "dense", "units": 500,
...}``), the Python counterpart of MQL5's ``CLayerDescription``; ``nn.layers.from_config`` rebuilds it.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from nn.backend import Backend, Tensor
from nn.errors import NNConfigError

INITIALISERS = (
    "seed_uniform",
    "xavier_uniform",
    "xavier_normal",
    "he_uniform",
    "he_normal",
    "torch_uniform",
    "torch_complex_bias",
    "complex_unit",
    "zeros",
    "ones",
)


@dataclass(frozen=True)
class ParamSpec:
    """A parameter (or state buffer) a layer needs: name, per-layer shape, how to initialise it.

    ``fan_in``/``fan_out`` feed the Xavier/He initialisers; ``seed_uniform`` is the MQL5 library's
    uniform range (see ``nn.init``).
    """

    name: str
    shape: tuple[int, ...]
    init: str = "zeros"
    fan_in: int = 0
    fan_out: int = 0

    def __post_init__(self) -> None:
        if self.init not in INITIALISERS:
            raise NNConfigError(
                f"unknown initialiser {self.init!r}: expected one of {', '.join(INITIALISERS)}"
            )

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class Layer(ABC):
    """Base class of every layer. Subclasses set ``type_name`` and implement the abstract methods."""

    type_name: ClassVar[str]

    def __init__(self) -> None:
        self.backend: Backend | None = None
        self.params: dict[str, Tensor] = {}
        self.grads: dict[str, Tensor] = {}
        self.state: dict[str, Tensor] = {}
        self.input_shape: tuple[int, ...] | None = None
        self.output_shape: tuple[int, ...] | None = None

    @abstractmethod
    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Fix the per-sample input shape; return the per-sample output shape. Validate arguments here."""

    def param_specs(self) -> list[ParamSpec]:
        """Trainable parameters (default: none)."""
        return []

    def state_specs(self) -> list[ParamSpec]:
        """Non-trainable state saved with the model, e.g. batch-norm running statistics (default: none)."""
        return []

    def constant_elements(self) -> int:
        """Elements of the constant tensors ``bind`` builds from the shapes (a DFT basis, a positional
        table; default: none). With the parameter and state specs, this sizes a model before anything is
        allocated, so a model file can be refused before its architecture is built."""
        return 0

    def bind(
        self,
        backend: Backend,
        params: dict[str, Tensor],
        grads: dict[str, Tensor],
        state: dict[str, Tensor],
    ) -> None:
        """Attach the backend and the views into the model's flat buffers."""
        self.backend, self.params, self.grads, self.state = backend, params, grads, state

    @abstractmethod
    def forward(self, x: Tensor, training: bool) -> Tensor:
        """``x (B, *input_shape)`` -> ``(B, *output_shape)``; keeps what ``backward`` needs."""

    @abstractmethod
    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        """Given ``dL/dy``, overwrite ``self.grads`` with ``dL/dθ`` and return ``dL/dx`` (or ``None``)."""

    def config(self) -> dict[str, Any]:
        """JSON-serialisable description: ``type`` and every ``__init__`` argument by name.

        The configuration is stated once, in the constructor's signature: each argument is read back from
        the attribute of the same name, so a layer that keeps its arguments needs no ``config()`` of its own
        (one that stores a transformed form, as ``Dense`` its ``Activation``, overrides this).
        """
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {"type": self.type_name, **{name: getattr(self, name) for name in names}}
