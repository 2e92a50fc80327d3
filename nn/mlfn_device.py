"""The supervised net's criterion and gradient on the backend (spec dbn.md §1.3–§1.5), for CG on the device.

``DeviceCriterion(backend, net, x, t, penalty)`` keeps the inputs, the targets and a weight mask on the
backend; ``value(theta)`` and ``value_grad(theta)`` take the parameters as one backend tensor and return the
criterion as a Python float (the only host read) and the gradient as a backend tensor. The forward pass is
the core ``dense_forward`` (logistic hidden layers, linear output), the error the core ``loss`` (``mse``, or
``softmax_cce`` on one-hot rows of the true class = the argmax of the target row), the backward pass
``dense_backward``, and the weight penalty the family's ``dbn_weight_penalty`` (biases masked out). With
``BackendSpace`` (``dbn_axpby``, ``dbn_dot``) ``nn.cg.conjugate_gradient`` then runs every line search on the
device too: per evaluation one scalar, per iteration a few dot products come back, never a vector.

The float64 reference is ``nn.mlfn.criterion``; the two agree except where a true class's probability is
below about 1e-25, where the reference's ``−log(p + 1e−30)`` flattens and log-softmax does not (and the
reference clamps logits at 300 before a max-subtracted softmax that does not need it).

Layout: each layer's weights ``(O, I)`` then its bias ``(O,)``, as ``Net.flat()``, but every block starts at
a multiple of the backend's alignment (views into one flat tensor); padding is zero and stays zero, since
every vector the optimiser forms is a combination of such vectors.
"""

from __future__ import annotations

import numpy as np

from nn.backend import Activation, Backend, Tensor
from nn.errors import NNDataError
from nn.mlfn import Net

_SIGMOID, _LINEAR = Activation("sigmoid"), Activation("linear")


def _aligned(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


class DeviceCriterion:
    """DEEP's training criterion of a ``Net``'s architecture on ``backend`` for fixed data."""

    def __init__(self, backend: Backend, net: Net, x: np.ndarray, t: np.ndarray, penalty: float) -> None:
        be = self.backend = backend
        self.shapes = [w.shape for w, _ in net.layers]
        self.classifier = net.classifier
        self.blocks: list[tuple[int, int]] = []  # (weight offset, bias offset) per layer
        index, mask, at = [], [], 0
        for o, i in self.shapes:
            w_at = at
            b_at = _aligned(w_at + o * i, be.alignment)
            at = _aligned(b_at + o, be.alignment)
            self.blocks.append((w_at, b_at))
            index += [np.arange(w_at, w_at + o * i), np.arange(b_at, b_at + o)]
            mask.append(np.arange(w_at, w_at + o * i))
        self.size = at
        self._index = np.concatenate(index)  # device position of each element of Net.flat()
        host_mask = np.zeros(at)
        host_mask[np.concatenate(mask)] = 1.0
        n, k = t.shape
        if x.shape[0] != n or x.shape[1] != self.shapes[0][1]:
            raise NNDataError(
                f"criterion data: inputs {x.shape} and targets {t.shape} do not fit the net "
                f"({self.shapes[0][1]} inputs)"
            )
        if self.classifier:
            t = np.eye(k)[np.argmax(t, axis=1)]
        self._kind = "softmax_cce" if self.classifier else "mse"
        # softmax_cce averages over rows; DEEP divides by cases·outputs: the gradient is scaled here and the
        # value on the host. mse already averages over every element.
        self._scale = 1.0 / k if self.classifier else 1.0
        self._coef = penalty / len(self._index)  # per weight, over all weights and biases (spec §1.5)
        self.x, self.t, self.mask = be.asarray(x), be.asarray(t), be.asarray(host_mask)
        self.evaluations = 0

    # --- parameters ----------------------------------------------------------------------------------
    def to_device(self, theta: np.ndarray) -> Tensor:
        """``Net.flat()`` order on the host -> the padded device layout."""
        out = np.zeros(self.size)
        out[self._index] = theta
        return self.backend.asarray(out)

    def to_host(self, theta: Tensor) -> np.ndarray:
        """The device layout -> ``Net.flat()`` order, float64."""
        return self.backend.to_numpy(theta).astype(np.float64)[self._index]

    def _layers(self, theta: Tensor) -> list[tuple[Tensor, Tensor]]:
        be = self.backend
        return [
            (be.view(theta, w_at, (o, i)), be.view(theta, b_at, (o,)))
            for (o, i), (w_at, b_at) in zip(self.shapes, self.blocks, strict=True)
        ]

    def _forward(self, layers) -> tuple[list[Tensor], Tensor]:
        be, acts = self.backend, [self.x]
        for w, b in layers[:-1]:
            acts.append(be.dense_forward(acts[-1], w, b, _SIGMOID))
        w, b = layers[-1]
        return acts, be.dense_forward(acts[-1], w, b, _LINEAR)

    def _finish(self, loss: Tensor, penalty: Tensor) -> float:
        be = self.backend
        total = be.dbn_axpby(self._scale, loss, 1.0, penalty)
        self.evaluations += 1
        return float(be.to_numpy(total)[0])

    # --- criterion -----------------------------------------------------------------------------------
    def value(self, theta: Tensor) -> float:
        """The criterion (error + penalty) at ``theta``."""
        be = self.backend
        _, out = self._forward(self._layers(theta))
        loss, _ = be.loss(self._kind, out, self.t)
        return self._finish(loss, be.dbn_weight_penalty(theta, self.mask, self._coef, None))

    def value_grad(self, theta: Tensor) -> tuple[float, Tensor]:
        """``(criterion, gradient)``: the gradient is a new tensor in the device layout."""
        be = self.backend
        layers = self._layers(theta)
        acts, out = self._forward(layers)
        loss, gy = be.loss(self._kind, out, self.t)
        if self._scale != 1.0:
            gy = be.scale(gy, self._scale)
        grad = be.zeros((self.size,))
        ys = [*acts[1:], out]
        for li in range(len(layers) - 1, -1, -1):
            w, _ = layers[li]
            (o, i), (w_at, b_at) = self.shapes[li], self.blocks[li]
            act = _LINEAR if li == len(layers) - 1 else _SIGMOID
            gy = be.dense_backward(
                acts[li], w, ys[li], gy, act, be.view(grad, w_at, (o, i)), be.view(grad, b_at, (o,)), li > 0
            )
        pen = be.dbn_weight_penalty(theta, self.mask, self._coef, grad)
        return self._finish(loss, pen), grad


class BackendSpace:
    """The vector operations ``nn.cg.conjugate_gradient`` needs, on backend tensors."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def axpby(self, alpha: float, x: Tensor, beta: float, y: Tensor) -> Tensor:
        return self.backend.dbn_axpby(alpha, x, beta, y)

    def dot(self, a: Tensor, b: Tensor) -> float:
        return float(self.backend.to_numpy(self.backend.dbn_dot(a, b))[0])
