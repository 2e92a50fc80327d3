"""Optimizers (SGD -> Momentum -> AdaGrad -> RMSProp -> AdaDelta -> Adam), learning-rate schedules, clipping.

An optimizer updates the model's whole flat parameter buffer in one backend call per step, with its state
(velocity, accumulators, moments) in flat buffers of the same layout ("slots"). Every optimizer takes:

- ``l1``, ``l2``: regularisation added to the gradient, ``g' = g + l1·sign(w) + l2·w`` (over every
  parameter, biases included, as the MQL5 library does);
- ``clipnorm``: if set, the gradient is scaled to global L2 norm ``<= clipnorm`` before the update;
- ``schedule``: a learning-rate schedule evaluated once per epoch (``StepDecay``, ``ExponentialDecay``).

Defaults follow the papers (Adam: β1 0.9, β2 0.999, the MQL5 library's lr 3e-4 is a good start for it).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from nn.backend import Backend, Tensor
from nn.errors import NNConfigError


@dataclass(frozen=True)
class StepDecay:
    """``lr·gamma^⌊max(0, epoch − start) / step_size⌋``: drop by ``gamma`` every ``step_size`` epochs after
    the first ``start`` epochs. The Time-Series-Library's ``lradj='type1'`` ("halve every epoch"), which the
    official ATFNet and PatchTST code runs, sets the rate after each epoch from the NEXT epoch's 1-based
    number, so its first two epochs both run at ``lr``: that is ``StepDecay(1, 0.5, start=1)``."""

    step_size: int = 10
    gamma: float = 0.5
    start: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.step_size, int) or self.step_size < 1:
            raise NNConfigError(
                f"StepDecay step_size must be a positive integer (epochs), got {self.step_size!r}"
            )
        if not 0.0 < self.gamma <= 1.0:
            raise NNConfigError(f"StepDecay gamma must be in (0, 1], got {self.gamma!r}")
        if not isinstance(self.start, int) or isinstance(self.start, bool) or self.start < 0:
            raise NNConfigError(f"StepDecay start must be an integer >= 0 (epochs), got {self.start!r}")

    def __call__(self, lr: float, epoch: int) -> float:
        return lr * self.gamma ** (max(0, epoch - self.start) // self.step_size)

    def config(self) -> dict[str, Any]:
        return {"type": "step", **asdict(self)}


@dataclass(frozen=True)
class ExponentialDecay:
    """``lr·rate^epoch``: a smooth decay by ``rate`` per epoch."""

    rate: float = 0.95

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise NNConfigError(f"ExponentialDecay rate must be in (0, 1], got {self.rate!r}")

    def __call__(self, lr: float, epoch: int) -> float:
        return lr * self.rate**epoch

    def config(self) -> dict[str, Any]:
        return {"type": "exponential", **asdict(self)}


Schedule = StepDecay | ExponentialDecay
_SCHEDULES: dict[str, type] = {"step": StepDecay, "exponential": ExponentialDecay}


def schedule_from_config(spec: Schedule | dict[str, Any] | None) -> Schedule | None:
    if spec is None or isinstance(spec, StepDecay | ExponentialDecay):
        return spec
    if not isinstance(spec, dict) or spec.get("type") not in _SCHEDULES:
        raise NNConfigError(f"schedule must be {{'type': 'step'|'exponential', ...}}, got {spec!r}")
    return _SCHEDULES[spec["type"]](**{k: v for k, v in spec.items() if k != "type"})


class Optimizer(ABC):
    """Base class: hyper-parameters, regularisation, clipping, schedule and the step counter."""

    type_name: ClassVar[str]
    slots: ClassVar[int] = 0  # state buffers of the parameter buffer's size

    def __init__(
        self,
        lr: float,
        *,
        l1: float = 0.0,
        l2: float = 0.0,
        clipnorm: float | None = None,
        schedule: Schedule | dict[str, Any] | None = None,
    ) -> None:
        for name, value in (("lr", lr), ("l1", l1), ("l2", l2)):
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise NNConfigError(f"{self.type_name} {name} must be a finite number >= 0, got {value!r}")
        if clipnorm is not None and not clipnorm > 0:
            raise NNConfigError(f"{self.type_name} clipnorm must be positive or None, got {clipnorm!r}")
        self.lr, self.l1, self.l2, self.clipnorm = float(lr), float(l1), float(l2), clipnorm
        self.schedule = schedule_from_config(schedule)
        self.iterations = 0  # updates done so far (Adam's t is iterations after the increment)
        self.current_lr = self.lr

    def begin_epoch(self, epoch: int) -> None:
        """Set the learning rate for ``epoch`` (0-based, counted over the model's whole training life)."""
        self.current_lr = self.schedule(self.lr, epoch) if self.schedule else self.lr

    def step(self, backend: Backend, w: Tensor, g: Tensor, slots: list[Tensor]) -> None:
        """Clip ``g`` if asked, then update ``w (P,)`` in place from ``g (P,)`` and the state ``slots``."""
        if self.clipnorm is not None:
            backend.clip_by_global_norm_(g, self.clipnorm)
        self.iterations += 1
        self._update(backend, w, g, slots)

    @abstractmethod
    def _update(self, backend: Backend, w: Tensor, g: Tensor, slots: list[Tensor]) -> None:
        """The optimizer's backend call, with ``self.current_lr`` and ``self.iterations`` already set."""

    def _hyper(self) -> dict[str, Any]:
        return {}

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"type": self.type_name, "lr": self.lr, **self._hyper()}
        cfg |= {"l1": self.l1, "l2": self.l2, "clipnorm": self.clipnorm}
        cfg["schedule"] = self.schedule.config() if self.schedule else None
        return cfg


class SGD(Optimizer):
    """Plain gradient descent: ``w -= lr·g'``."""

    type_name = "sgd"

    def __init__(self, lr: float = 0.01, **common: Any) -> None:
        super().__init__(lr, **common)

    def _update(self, backend, w, g, slots):
        backend.sgd_update(w, g, lr=self.current_lr, l1=self.l1, l2=self.l2)


class Momentum(Optimizer):
    """Heavy-ball momentum ``v = μv + g'``, ``w -= lr·v``; Nesterov's look-ahead with ``nesterov=True``."""

    type_name = "momentum"
    slots = 1

    def __init__(
        self, lr: float = 0.01, momentum: float = 0.9, nesterov: bool = False, **common: Any
    ) -> None:
        super().__init__(lr, **common)
        if not 0.0 <= momentum < 1.0:
            raise NNConfigError(f"momentum must be in [0, 1), got {momentum!r}")
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def _hyper(self):
        return {"momentum": self.momentum, "nesterov": self.nesterov}

    def _update(self, backend, w, g, slots):
        backend.momentum_update(
            w,
            g,
            slots[0],
            lr=self.current_lr,
            momentum=self.momentum,
            nesterov=self.nesterov,
            l1=self.l1,
            l2=self.l2,
        )


class AdaGrad(Optimizer):
    """Duchi et al. 2011: ``G += g'²``, ``w -= lr·g'/(√G + eps)``."""

    type_name = "adagrad"
    slots = 1

    def __init__(self, lr: float = 0.01, eps: float = 1e-8, **common: Any) -> None:
        super().__init__(lr, **common)
        self.eps = _positive("adagrad eps", eps)

    def _hyper(self):
        return {"eps": self.eps}

    def _update(self, backend, w, g, slots):
        backend.adagrad_update(w, g, slots[0], lr=self.current_lr, eps=self.eps, l1=self.l1, l2=self.l2)


class RMSProp(Optimizer):
    """Tieleman & Hinton 2012: ``s = ρs + (1−ρ)g'²``, ``w -= lr·g'/(√s + eps)``."""

    type_name = "rmsprop"
    slots = 1

    def __init__(self, lr: float = 0.001, rho: float = 0.9, eps: float = 1e-8, **common: Any) -> None:
        super().__init__(lr, **common)
        self.rho, self.eps = _fraction("rmsprop rho", rho), _positive("rmsprop eps", eps)

    def _hyper(self):
        return {"rho": self.rho, "eps": self.eps}

    def _update(self, backend, w, g, slots):
        backend.rmsprop_update(
            w, g, slots[0], lr=self.current_lr, rho=self.rho, eps=self.eps, l1=self.l1, l2=self.l2
        )


class AdaDelta(Optimizer):
    """Zeiler 2012: unit-consistent steps from running averages of g'² and Δ²; ``lr = 1`` is the paper's."""

    type_name = "adadelta"
    slots = 2

    def __init__(self, lr: float = 1.0, rho: float = 0.95, eps: float = 1e-6, **common: Any) -> None:
        super().__init__(lr, **common)
        self.rho, self.eps = _fraction("adadelta rho", rho), _positive("adadelta eps", eps)

    def _hyper(self):
        return {"rho": self.rho, "eps": self.eps}

    def _update(self, backend, w, g, slots):
        backend.adadelta_update(
            w, g, slots[0], slots[1], lr=self.current_lr, rho=self.rho, eps=self.eps, l1=self.l1, l2=self.l2
        )


class Adam(Optimizer):
    """Kingma & Ba 2015 with bias correction by ``1 − β^t`` (the seed divided by ``1 − β``: seed bug 2)."""

    type_name = "adam"
    slots = 2

    def __init__(
        self, lr: float = 3e-4, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, **common: Any
    ) -> None:
        super().__init__(lr, **common)
        self.beta1, self.beta2 = _fraction("adam beta1", beta1), _fraction("adam beta2", beta2)
        self.eps = _positive("adam eps", eps)

    def _hyper(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}

    def _update(self, backend, w, g, slots):
        backend.adam_update(
            w, g, slots[0], slots[1], lr=self.current_lr, beta1=self.beta1, beta2=self.beta2, eps=self.eps,
            step=self.iterations, l1=self.l1, l2=self.l2,
        )  # fmt: skip


def _fraction(name: str, value: float) -> float:
    if not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise NNConfigError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


def _positive(name: str, value: float) -> float:
    # Epsilons as tiny as the seed's 1e-37 sit at float32's denormal edge and can flush to zero (seed bug 4).
    if not isinstance(value, int | float) or not value >= 1e-30:
        raise NNConfigError(f"{name} must be a positive number >= 1e-30, got {value!r}")
    return float(value)


OPTIMIZERS: dict[str, type[Optimizer]] = {
    cls.type_name: cls for cls in (SGD, Momentum, AdaGrad, RMSProp, AdaDelta, Adam)
}


def optimizer_from_config(spec: Optimizer | dict[str, Any] | str) -> Optimizer:
    """``"adam"``, ``{"type": "adam", "lr": 3e-4, ...}`` (as ``config()`` writes it) or an ``Optimizer``."""
    if isinstance(spec, Optimizer):
        return spec
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict) or spec.get("type") not in OPTIMIZERS:
        raise NNConfigError(f"unknown optimizer {spec!r}: expected a type among {', '.join(OPTIMIZERS)}")
    kwargs = {k: v for k, v in spec.items() if k != "type"}
    try:
        return OPTIMIZERS[spec["type"]](**kwargs)
    except TypeError as exc:
        raise NNConfigError(f"optimizer {spec['type']!r}: {exc}") from None
