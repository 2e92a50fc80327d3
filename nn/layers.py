"""The core layers (dense, activation, softmax, dropout, batch normalization) and the layer registry.

Each layer is written once in terms of ``nn.backend.Backend`` ops, so it runs unchanged on NumPy and OpenCL.
A layer's ``config()`` is the plain, JSON-serialisable description that MQL5's ``CLayerDescription`` plays in
the seed library; ``from_config`` turns it back into a layer through a registry that other modules extend
with ``@register_layer`` (attention, complex and spectral layers live in their own files).
"""

from __future__ import annotations

from typing import Any

from nn.backend import ACTIVATIONS, Activation, Backend, Tensor
from nn.errors import NNConfigError, NNTypeError
from nn.layer import INITIALISERS, Layer, ParamSpec

_REGISTRY: dict[str, type[Layer]] = {}


def register_layer(cls: type[Layer]) -> type[Layer]:
    """Class decorator: make ``cls`` constructible by ``from_config({"type": cls.type_name, ...})``."""
    name = getattr(cls, "type_name", None)
    if not isinstance(name, str) or not name:
        raise NNTypeError(f"{cls.__name__} needs a non-empty class attribute type_name to be registered")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise NNConfigError(f"layer type {name!r} is already registered by {_REGISTRY[name].__name__}")
    _REGISTRY[name] = cls
    return cls


def layer_types() -> list[str]:
    """Registered layer type names (for error messages and documentation)."""
    return sorted(_REGISTRY)


def from_config(config: dict[str, Any]) -> Layer:
    """Rebuild a layer from ``config()`` output: ``{"type": "dense", "units": 500, ...}``."""
    if not isinstance(config, dict) or "type" not in config:
        raise NNConfigError(f"a layer description must be a dict with a 'type' key, got {config!r}")
    kind = config["type"]
    if kind not in _REGISTRY:
        raise NNConfigError(f"unknown layer type {kind!r}: expected one of {', '.join(layer_types())}")
    kwargs = {k: v for k, v in config.items() if k != "type"}
    try:
        return _REGISTRY[kind](**kwargs)
    except TypeError as exc:  # unexpected or missing keyword: name the layer and the problem
        raise NNConfigError(f"layer {kind!r}: {exc}") from None


def _activation_config(act: Activation) -> str | dict[str, Any]:
    """The shortest description that ``Activation.of`` maps back to ``act``."""
    if Activation.of(act.kind) == act:
        return act.kind
    return {"kind": act.kind, "alpha": act.alpha, "beta": act.beta}


def _check_units(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise NNConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _flat_features(layer: str, input_shape: tuple[int, ...]) -> int:
    if len(input_shape) != 1:
        raise NNConfigError(f"{layer} expects a flat (F,) input per sample, got shape {input_shape}")
    return input_shape[0]


@register_layer
class Dense(Layer):
    """Fully connected layer ``y = act(x·wᵀ + b)``: ``x (B, I)`` -> ``(B, units)``, ``w (units, I)``.

    Output-derivable activations (linear, sigmoid, tanh, relu, lrelu) are fused into the dense ops; swish,
    softplus and gelu run as a separate elementwise op on the pre-activation. ``activation="softmax"`` is
    accepted for the MQL5-style description and expands (``expand()``) into ``Dense(linear)`` + ``Softmax``,
    so that categorical cross-entropy can train through the fused softmax loss.

    ``init`` defaults to Xavier/Glorot uniform for saturating activations and He uniform for the ReLU family;
    ``"seed_uniform"`` reproduces the MQL5 library's ``U(-0.5, 0.5)``.
    """

    type_name = "dense"

    def __init__(
        self, units: int, activation: str | dict | Activation | None = None, init: str | None = None
    ) -> None:
        super().__init__()
        self.units = _check_units("dense units", units)
        self.softmax = activation == "softmax"
        self.act = Activation("linear") if self.softmax else Activation.of(activation)
        if init is None:
            init = "he_uniform" if self.act.kind in ("relu", "lrelu", "swish", "gelu") else "xavier_uniform"
        if init not in INITIALISERS:
            raise NNConfigError(f"dense init {init!r}: expected one of {', '.join(INITIALISERS)}")
        self.init = init
        self._fused = self.act if self.act.output_derivable else Activation("linear")

    def expand(self) -> list[Layer]:
        """The layers this description stands for (a softmax dense is two layers)."""
        if self.softmax:
            return [Dense(self.units, None, self.init), Softmax()]
        return [self]

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.input_shape = tuple(input_shape)
        self.n_in = _flat_features("dense", self.input_shape)
        self.output_shape = (self.units,)
        return self.output_shape

    def param_specs(self) -> list[ParamSpec]:
        return [
            ParamSpec("w", (self.units, self.n_in), self.init, fan_in=self.n_in, fan_out=self.units),
            ParamSpec("b", (self.units,), "zeros"),
        ]

    def forward(self, x: Tensor, training: bool) -> Tensor:
        be = self.backend
        self._x = x
        self._z = be.dense_forward(x, self.params["w"], self.params["b"], self._fused)
        if self._fused is self.act:
            return self._z
        self._y = be.activation_forward(self._z, self.act)
        return self._y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        be = self.backend
        if self._fused is not self.act:
            gy = be.activation_backward(self._z, self._y, gy, self.act)
        return be.dense_backward(
            self._x,
            self.params["w"],
            self._z,
            gy,
            self._fused,
            self.grads["w"],
            self.grads["b"],
            need_input_grad,
        )

    def config(self) -> dict[str, Any]:
        act = "softmax" if self.softmax else _activation_config(self.act)
        return {"type": self.type_name, "units": self.units, "activation": act, "init": self.init}


@register_layer
class ActivationLayer(Layer):
    """Elementwise activation of any kind (``nn.backend.ACTIVATIONS``) as a layer of its own."""

    type_name = "activation"

    def __init__(self, kind: str = "linear", alpha: float | None = None, beta: float = 0.0) -> None:
        super().__init__()
        if kind not in ACTIVATIONS:
            raise NNConfigError(f"activation layer kind {kind!r}: expected one of {', '.join(ACTIVATIONS)}")
        base = Activation.of(kind)
        self.act = Activation(kind, base.alpha if alpha is None else float(alpha), float(beta))

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def forward(self, x: Tensor, training: bool) -> Tensor:
        self._x = x
        self._y = self.backend.activation_forward(x, self.act)
        return self._y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        if not need_input_grad:
            return None
        return self.backend.activation_backward(self._x, self._y, gy, self.act)

    def config(self) -> dict[str, Any]:
        return {"type": self.type_name, "kind": self.act.kind, "alpha": self.act.alpha, "beta": self.act.beta}


@register_layer
class Softmax(Layer):
    """Row-wise softmax over the class axis: ``(B, C)`` -> probabilities ``(B, C)``.

    When it is the last layer and the loss is ``"cce"``, the model skips it in training and feeds the logits
    to the fused ``softmax_cce`` loss (gradient ``p − t``); ``predict`` still returns probabilities.
    """

    type_name = "softmax"

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        _flat_features("softmax", tuple(input_shape))
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def forward(self, x: Tensor, training: bool) -> Tensor:
        self._y = self.backend.softmax_forward(x)
        return self._y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        return self.backend.softmax_backward(self._y, gy) if need_input_grad else None


class DropoutMask:
    """Inverted-dropout masks, the one dropout helper of every layer: ``1/(1−rate)`` or 0 per element.

    Masks come from the counter-based hash (``backend.dropout_mask``, or ``backend.dropout_apply`` drawing
    and applying them in one pass; complex layers draw one per complex element, with the logical shape, and
    scale both parts by it) with ``seed`` and a ``counter`` advanced
    once per training pass, so NumPy and OpenCL draw the same masks and runs repeat exactly; model files
    save the counter. Inference and rate 0 draw nothing (``None``).
    """

    def __init__(self, rate: float, seed: int | None = None, what: str = "dropout") -> None:
        if not isinstance(rate, int | float) or not 0.0 <= rate < 1.0:
            raise NNConfigError(f"{what} rate must be in [0, 1), got {rate!r}")
        self.rate, self.seed, self.counter = float(rate), seed, 0

    def _advance(self, training: bool) -> bool:
        """Whether this pass drops anything; if it does, the counter moves on to this pass's mask."""
        if not training or self.rate == 0.0:
            return False
        self.counter += 1
        return True

    def draw(self, backend: Backend, shape: tuple[int, ...], training: bool) -> Tensor | None:
        """The next mask of ``shape`` (for complex values their logical shape, without the trailing 2),
        or ``None``."""
        if not self._advance(training):
            return None
        return backend.dropout_mask(tuple(shape), self.rate, self.seed or 0, self.counter)

    def apply(
        self, backend: Backend, x: Tensor, training: bool, pairs: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """``(x ⊙ mask, mask)`` (the next mask, drawn and applied in one pass); ``(x, None)`` when nothing
        is dropped. ``pairs``: ``x`` is complex ``(..., 2)`` and one draw covers each (Re, Im) pair."""
        if not self._advance(training):
            return x, None
        return backend.dropout_apply(x, self.rate, self.seed or 0, self.counter, pairs)

    @staticmethod
    def grad(backend: Backend, g: Tensor, mask: Tensor | None) -> Tensor:
        """The gradient through ``apply``: the same mask."""
        return g if mask is None else backend.mul(g, mask)


class DropsWeights:
    """For layers that draw their masks from a ``DropoutMask`` in ``self._drop`` (attention weights): its
    ``counter`` is the layer's, so model files save it and composites advance it with their other parts."""

    _drop: DropoutMask

    @property
    def counter(self) -> int:
        return self._drop.counter

    @counter.setter
    def counter(self, value: int) -> None:
        self._drop.counter = value


@register_layer
class Dropout(DropoutMask, Layer):
    """Inverted dropout as a layer: in training multiply by a ``DropoutMask``; identity in inference.

    ``seed=None`` lets the model derive a seed from its own seed and the layer's position.
    """

    type_name = "dropout"

    def __init__(self, rate: float, seed: int | None = None) -> None:
        Layer.__init__(self)
        DropoutMask.__init__(self, rate, seed)

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def forward(self, x: Tensor, training: bool) -> Tensor:
        y, self._mask = self.apply(self.backend, x, training)
        return y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        return self.grad(self.backend, gy, self._mask) if need_input_grad else None


@register_layer
class BatchNorm(Layer):
    """Batch normalization (Ioffe & Szegedy 2015) over the features of ``(B, F)`` inputs.

    Training normalises with the mini-batch's own mean and (biased) variance and updates the running
    statistics ``r = (1−momentum)·r + momentum·batch``; inference uses the running statistics. A batch of
    one row (the MQL5 online mode) has no variance, so it is normalised with the running statistics too.
    This replaces the seed library's per-sample streaming variant (seed bug 8).
    """

    type_name = "batchnorm"

    def __init__(self, momentum: float = 0.1, eps: float = 1e-5) -> None:
        super().__init__()
        if not 0.0 < momentum <= 1.0:
            raise NNConfigError(f"batchnorm momentum must be in (0, 1], got {momentum!r}")
        if not eps > 0.0:
            raise NNConfigError(f"batchnorm eps must be positive, got {eps!r}")
        self.momentum, self.eps = float(momentum), float(eps)

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.input_shape = self.output_shape = tuple(input_shape)
        self.n_features = _flat_features("batchnorm", self.input_shape)
        return self.output_shape

    def param_specs(self) -> list[ParamSpec]:
        f = self.n_features
        return [ParamSpec("gamma", (f,), "ones"), ParamSpec("beta", (f,), "zeros")]

    def state_specs(self) -> list[ParamSpec]:
        f = self.n_features
        return [ParamSpec("running_mean", (f,), "zeros"), ParamSpec("running_var", (f,), "ones")]

    def forward(self, x: Tensor, training: bool) -> Tensor:
        p, s = self.params, self.state
        y, self._xhat, self._inv_std = self.backend.batchnorm_forward(
            x, p["gamma"], p["beta"], s["running_mean"], s["running_var"], training, self.momentum, self.eps
        )
        return y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        p, g = self.params, self.grads
        gx = self.backend.batchnorm_backward(gy, self._xhat, self._inv_std, p["gamma"], g["gamma"], g["beta"])
        return gx if need_input_grad else None
