"""The supervised feed-forward net of a DBN (spec dbn.md §1), float64 on the host, full batch.

``criterion`` is the reference that ``nn.mlfn_device.DeviceCriterion`` (the same criterion on a backend,
which training uses) is tested against; ``Net`` holds the weights between and after training.

Layers are ``(W (O, I), b (O,))``: logistic hidden layers, then a linear (regression) or SoftMax
(classifier) output. The criterion is DEEP's: MSE or negative log likelihood of the true class (the argmax
of the target row, so continuous targets make a "forced" classifier), both divided by ``cases·outputs``,
plus ``(λ / n_weights)·Σ w²`` over the weights but not the biases (§1.5). Gradients are ``dE/dθ``
(descent convention; the book accumulates the negative). SoftMax uses ``p − t`` as its output delta on
every path (the book's CUDA listing uses the MSE form there, §8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nn.rbm_ops_numpy import sigmoid

LOGIT_CLAMP = 300.0


@dataclass
class Net:
    """Layer list plus the output kind; ``flat()``/``set_flat()`` give the optimisers one vector."""

    layers: list[tuple[np.ndarray, np.ndarray]]
    classifier: bool

    @property
    def n_weights(self) -> int:
        return sum(w.size + b.size for w, b in self.layers)

    def flat(self) -> np.ndarray:
        return np.concatenate([np.concatenate([w.ravel(), b]) for w, b in self.layers])

    def set_flat(self, theta: np.ndarray) -> None:
        at = 0
        for i, (w, b) in enumerate(self.layers):
            nw = w.size
            end = at + nw + b.size
            self.layers[i] = (theta[at : at + nw].reshape(w.shape).copy(), theta[at + nw : end].copy())
            at += nw + b.size

    def hidden(self, x: np.ndarray) -> list[np.ndarray]:
        """Activations of the input and of every hidden layer."""
        acts = [x]
        for w, b in self.layers[:-1]:
            acts.append(sigmoid(acts[-1] @ w.T + b))
        return acts

    def output(self, last: np.ndarray) -> np.ndarray:
        w, b = self.layers[-1]
        z = last @ w.T + b
        if not self.classifier:
            return z
        z = np.minimum(z, LOGIT_CLAMP)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.output(self.hidden(x)[-1])


def raw_error(out: np.ndarray, t: np.ndarray, classifier: bool) -> float:
    """MSE per case and output, or the negative log likelihood of the true classes per case and output."""
    n, k = t.shape
    if classifier:
        p = out[np.arange(n), t.argmax(axis=1)]
        return float(-np.log(p + 1e-30).sum() / (n * k))
    return float(((out - t) ** 2).sum() / (n * k))


def weight_penalty(net: Net, penalty: float) -> float:
    """DEEP's supervised weight penalty (spec §1.5): ``(λ / n_weights)·Σ w²`` over the weights, not the
    biases (``n_weights`` counts both)."""
    return penalty / net.n_weights * sum(float((w * w).sum()) for w, _ in net.layers)


def criterion(net: Net, x: np.ndarray, t: np.ndarray, penalty: float, grad: bool = True):
    """``(E, dE/dθ)`` (or ``E`` alone) at the net's current weights: ``raw_error`` + ``weight_penalty``."""
    acts = net.hidden(x)
    out = net.output(acts[-1])
    theta_pen = penalty / net.n_weights
    e = raw_error(out, t, net.classifier) + weight_penalty(net, penalty)
    if not grad:
        return e
    n, k = t.shape
    delta = out - np.eye(k)[t.argmax(axis=1)] if net.classifier else 2.0 * (out - t)
    delta /= n * k
    grads = []
    for li in range(len(net.layers) - 1, -1, -1):
        w, _ = net.layers[li]
        a = acts[li]
        grads.append((delta.T @ a + 2.0 * theta_pen * w, delta.sum(axis=0)))
        if li:
            delta = (delta @ w) * a * (1.0 - a)
    grads.reverse()
    return e, np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in grads])
