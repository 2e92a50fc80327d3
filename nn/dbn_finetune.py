"""Fine-tuning a DBN as an ordinary ``nn.Sequential`` (dense sigmoid layers initialised from the RBMs).

The book fine-tunes by full-batch CG (``nn.dbn.fine_tune``); this is the mini-batch alternative on the
project's own layers, losses and optimizers, on any backend: the RBM stack's ``W``/``c`` become dense sigmoid
layers, the head's layers follow (softmax + cross-entropy for classifiers, linear + MSE otherwise), the net
is trained by ``Sequential.fit`` and the trained weights are written back into the DBN.
"""

from __future__ import annotations

import numpy as np

from nn.dbn import DBN
from nn.model import Sequential


def to_sequential(model: DBN, backend="numpy", optimizer="adam", seed: int = 0) -> Sequential:
    """The DBN's deterministic forward pass as a ``Sequential`` holding the same weights."""
    stack = [(ly.w, ly.c) for ly in model.layers] + list(model.head.layers)
    specs = [{"type": "dense", "units": int(w.shape[0]), "activation": "sigmoid"} for w, _ in stack[:-1]]
    out = "softmax" if model.head.classifier else "linear"
    specs.append({"type": "dense", "units": int(stack[-1][0].shape[0]), "activation": out})
    loss = "cce" if out == "softmax" else "mse"
    net = Sequential.from_specs(
        specs, input_shape=(model.n_inputs,), loss=loss, optimizer=optimizer, backend=backend, seed=seed
    )
    arrays = net.export_arrays()
    arrays["params"] = np.concatenate([np.concatenate([w.ravel(), b]) for w, b in stack])
    net.import_arrays(arrays)
    return net


def fine_tune_sequential(
    model: DBN,
    x: np.ndarray,
    t: np.ndarray,
    *,
    epochs: int = 20,
    batch_size: int = 32,
    backend="numpy",
    optimizer=None,
    seed: int = 0,
) -> Sequential:
    """Train the whole stack with ``Sequential.fit`` and copy the result back into ``model``."""
    opt = optimizer or {"type": "adam", "lr": 1e-3}
    net = to_sequential(model, backend, opt, seed)
    net.fit(
        np.asarray(x, dtype=np.float64),
        np.asarray(t, dtype=np.float64),
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        progress=False,
    )
    flat = net.export_arrays()["params"]
    at, layers = 0, []
    for w, b in [(ly.w, ly.c) for ly in model.layers] + list(model.head.layers):
        layers.append((flat[at : at + w.size].reshape(w.shape), flat[at + w.size : at + w.size + b.size]))
        at += w.size + b.size
    for ly, (w, c) in zip(model.layers, layers, strict=False):
        ly.w, ly.c = w, c
    model.head.layers = layers[len(model.layers) :]
    model.fine_tuned = True
    return net
