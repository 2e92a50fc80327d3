"""Trained networks as ONNX nodes: ``Sequential`` stacks of the core layers and deep belief nets.

Weights become float32 initialisers and the arithmetic runs in float32, the element type every ONNX Runtime
CPU kernel has (and MetaTrader's ``matrixf``); each layer computes what its NumPy reference computes
(``nn.ops_numpy``): dense ``x·wᵀ + b`` (``Gemm``), every activation of ``nn.backend.ACTIVATIONS`` (GELU with
the exact ``erf``), softmax, batch normalisation with its running statistics, dropout as the identity it is
in inference. A layer of any other type is refused by name.
"""

from __future__ import annotations

import math

import numpy as np

from nn.backend import Activation
from nn.dbn import DBN
from nn.layers import ActivationLayer, BatchNorm, Dense, Dropout, Softmax
from nn.mlfn import LOGIT_CLAMP
from nn.model import Sequential
from strategies.errors import ExportError
from strategies.export.graph import DOUBLE, FLOAT, Graph

F32 = np.float32


def activation(g: Graph, x: str, act: Activation, dtype: type = F32) -> str:
    """``act(x)`` with the definitions of ``nn.backend.Activation``, on ``dtype`` (float32 or float64) values.

    ONNX Runtime 1.14 has float32 kernels only for ``Erf`` and ``Softplus`` (``graph.FLOAT_ONLY``): in a
    float64 graph softplus is written out in its stable form and GELU's ``erf`` alone runs in float32."""
    k = act.kind
    if k == "linear":
        if act.alpha == 1.0 and act.beta == 0.0:
            return x
        return g.add(g.mul(x, g.const(act.alpha, dtype)), g.const(act.beta, dtype))
    if k == "softplus" and dtype is not F32:  # max(x, 0) + log(1 + e^-|x|), as nn.ops_numpy
        tail = g.op("Log", g.add(g.const(1.0, dtype), g.op("Exp", g.op("Neg", g.op("Abs", x)))))
        return g.add(g.op("Relu", x), tail)
    if k in ("sigmoid", "tanh", "relu", "softplus"):
        return g.op({"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "softplus": "Softplus"}[k], x)
    if k == "lrelu":
        return g.op("LeakyRelu", x, alpha=float(act.alpha))
    if k == "swish":
        return g.mul(x, g.op("Sigmoid", g.mul(x, g.const(act.alpha, dtype))))
    if k == "gelu":
        z = g.div(x, g.const(math.sqrt(2.0), dtype))
        if dtype is F32:
            erf = g.op("Erf", z)
        else:
            erf = g.op("Cast", g.op("Erf", g.op("Cast", z, to=FLOAT)), to=DOUBLE)
        cdf = g.add(g.const(1.0, dtype), erf)
        return g.mul(g.mul(x, g.const(0.5, dtype)), cdf)
    raise ExportError(f"activation {k!r} has no ONNX form")


def sequential(g: Graph, x: str, model: Sequential) -> str:
    """``x (B, F)`` float32 through every layer of ``model`` (inference)."""
    be = model.backend
    for i, layer in enumerate(model.layers):
        p = {k: be.to_numpy(v).astype(F32) for k, v in layer.params.items()}
        if isinstance(layer, Dense):
            x = activation(
                g, g.op("Gemm", x, g.const(p["w"], F32), g.const(p["b"], F32), transB=1), layer.act
            )
        elif isinstance(layer, ActivationLayer):
            x = activation(g, x, layer.act)
        elif isinstance(layer, Softmax):
            x = g.op("Softmax", x, axis=-1)
        elif isinstance(layer, Dropout):
            continue  # identity in inference
        elif isinstance(layer, BatchNorm):
            s = {k: be.to_numpy(v).astype(np.float64) for k, v in layer.state.items()}
            scale = p["gamma"].astype(np.float64) / np.sqrt(s["running_var"] + layer.eps)
            shift = p["beta"].astype(np.float64) - s["running_mean"] * scale
            x = g.add(g.mul(x, g.const(scale, F32)), g.const(shift, F32))
        else:
            raise ExportError(
                f"layer {i} ({layer.type_name}) cannot be exported: the ONNX export covers dense, "
                "activation, softmax, dropout and batchnorm layers of a dense network"
            )
    return x


def dbn(g: Graph, x: str, model: DBN) -> str:
    """``x (B, V)`` float32 in [0, 1] through a deep belief net's stack and head (``DBN.predict``)."""
    h = x
    for layer in model.layers:
        h = g.op("Sigmoid", g.op("Gemm", h, g.const(layer.w, F32), g.const(layer.c, F32), transB=1))
    head = model.head.layers
    for w, b in head[:-1]:
        h = g.op("Sigmoid", g.op("Gemm", h, g.const(w, F32), g.const(b, F32), transB=1))
    w, b = head[-1]
    z = g.op("Gemm", h, g.const(w, F32), g.const(b, F32), transB=1)
    if not model.head.classifier:
        return z
    return g.op("Softmax", g.op("Min", z, g.const(LOGIT_CLAMP, F32)), axis=-1)
