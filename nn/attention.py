"""Real-valued transformer layers: attention, layer norm, positional encodings, patching, RevIN.

These are the parts of PatchTST (Nie et al. 2023), the time-domain block of ATFNet (Ye et al. 2024,
arXiv 2404.05192). Every layer is written in backend ops only (``nn.backend`` plus ``AttentionNumpyOps`` /
``AttentionOpenCLOps``), so one implementation runs on NumPy float64 and on OpenCL.

Composite layers (the encoder layer, RevIN, the PatchTST backbone, ATFNet) declare their children's
parameters under prefixed names (``"attn.wqkv"``) and hand each child the matching views of the model's flat
buffers, so the one-buffer/one-launch optimizer design holds for nested layers too.

Dropout masks come from the counter-based hash (``backend.dropout_mask``): each layer carries a ``seed``
and counts its own training steps, so both backends draw identical masks without a host RNG.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nn.backend import Activation
from nn.errors import NNConfigError
from nn.init import bias_spec, check_scheme, weight_spec
from nn.layer import Layer, ParamSpec
from nn.layers import DropoutMask, DropsWeights, from_config, register_layer


class Composite(Layer):
    """A layer made of child layers; their parameters appear under ``"<child>.<name>"``."""

    def __init__(self) -> None:
        super().__init__()
        self.children: dict[str, Layer] = {}

    def own_param_specs(self) -> list[ParamSpec]:
        return []

    def param_specs(self) -> list[ParamSpec]:
        specs = list(self.own_param_specs())
        for prefix, child in self.children.items():
            specs += [_prefixed(prefix, s) for s in child.param_specs()]
        return specs

    def state_specs(self) -> list[ParamSpec]:
        return [_prefixed(p, s) for p, c in self.children.items() for s in c.state_specs()]

    def constant_elements(self) -> int:
        return sum(child.constant_elements() for child in self.children.values())

    def _counted(self) -> list[Any]:
        """Everything below that draws dropout masks: own ``DropoutMask`` objects, children with a
        ``counter``."""
        own = [v for v in vars(self).values() if isinstance(v, DropoutMask)]
        return own + [c for c in self.children.values() if hasattr(c, "counter")]

    @property
    def counter(self) -> int:
        """The dropout counter of the whole subtree (every mask-drawing part advances once per training
        pass); model files save it, so a resumed training draws fresh masks instead of repeating them."""
        return max((d.counter for d in self._counted()), default=0)

    @counter.setter
    def counter(self, value: int) -> None:
        for d in self._counted():
            d.counter = value

    def bind(self, backend, params, grads, state) -> None:
        super().bind(backend, params, grads, state)
        for prefix, child in self.children.items():
            head = prefix + "."
            child.bind(
                backend,
                {k[len(head) :]: v for k, v in params.items() if k.startswith(head)},
                {k[len(head) :]: v for k, v in grads.items() if k.startswith(head)},
                {k[len(head) :]: v for k, v in state.items() if k.startswith(head)},
            )


def _prefixed(prefix: str, spec: ParamSpec) -> ParamSpec:
    return ParamSpec(f"{prefix}.{spec.name}", spec.shape, spec.init, spec.fan_in, spec.fan_out)


def _layer(spec: Layer | dict[str, Any]) -> Layer:
    return spec if isinstance(spec, Layer) else from_config(spec)


@register_layer
class LayerNorm(Layer):
    """Normalise each vector over its last axis (``D``), then scale/shift by learned ``gamma``/``beta``."""

    type_name = "layernorm"

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps

    def build(self, input_shape):
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def param_specs(self):
        d = self.input_shape[-1]
        return [ParamSpec("gamma", (d,), "ones"), ParamSpec("beta", (d,), "zeros")]

    def forward(self, x, training):
        y, self._xhat, self._inv_std = self.backend.layernorm_forward(
            x, self.params["gamma"], self.params["beta"], self.eps
        )
        return y

    def backward(self, gy, need_input_grad=True):
        p, g = self.params, self.grads
        gx = self.backend.layernorm_backward(gy, self._xhat, self._inv_std, p["gamma"], g["gamma"], g["beta"])
        return gx if need_input_grad else None


@register_layer
class MultiHeadSelfAttention(DropsWeights, Layer):
    """Scaled dot-product self-attention over ``(S, D)`` token sequences (Vaswani et al. 2017).

    ``softmax(q·kᵀ/√d_k)·v`` per head, with fused q/k/v projection ``wqkv (3D, D)`` and output projection
    ``wo (D, D)``; ``causal`` masks future tokens; ``dropout`` acts on the attention weights as in PyTorch's
    ``FullAttention``. ``init``: ``"xavier"`` or ``"torch"`` (``nn.init.INIT_SCHEMES``; the fused ``wqkv``
    starts as the three separate ``nn.Linear(D, D)`` of the official code would).
    """

    type_name = "multihead_attention"

    def __init__(
        self,
        n_heads: int = 8,
        causal: bool = False,
        dropout: float = 0.0,
        seed: int = 0,
        init: str = "xavier",
    ) -> None:
        super().__init__()
        self.n_heads, self.causal, self.dropout, self.seed = n_heads, causal, dropout, seed
        self.init = check_scheme(self.type_name, init)
        self._drop = DropoutMask(dropout, seed)

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise NNConfigError(f"multihead_attention expects (tokens, d_model) inputs, got {input_shape}")
        d = input_shape[1]
        if self.n_heads < 1 or d % self.n_heads:
            raise NNConfigError(
                f"multihead_attention: d_model {d} is not divisible by n_heads {self.n_heads}"
            )
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def param_specs(self):
        d, init = self.input_shape[1], self.init
        return [
            weight_spec("wqkv", (3 * d, d), init, d, d),
            bias_spec("bqkv", (3 * d,), init, d),
            weight_spec("wo", (d, d), init, d, d),
            bias_spec("bo", (d,), init, d),
        ]

    def forward(self, x, training):
        be, p = self.backend, self.params
        b, s, _ = x.shape
        qkv = be.linear_forward(x, p["wqkv"], p["bqkv"])  # (B, S, 3D)
        mask = self._drop.draw(be, (b * self.n_heads, s, s), training)  # on the weights (BH, S, S)
        o, a = be.self_attention_forward(qkv, self.n_heads, self._scale, self.causal, mask)  # (B, S, D)
        self._cache = (x, qkv, a, mask, o)
        return be.linear_forward(o, p["wo"], p["bo"])

    @property
    def _scale(self) -> float:
        """``1/√d_k``: the scores of a head are divided by the square root of its width."""
        return 1.0 / math.sqrt(self.input_shape[1] // self.n_heads)

    def backward(self, gy, need_input_grad=True):
        be, p, g = self.backend, self.params, self.grads
        x, qkv, a, mask, o = self._cache
        go = be.linear_backward(o, p["wo"], gy, g["wo"], g["bo"], True)  # (B, S, D)
        gqkv = be.self_attention_backward(qkv, a, mask, go, self.n_heads, self._scale)  # (B, S, 3D)
        return be.linear_backward(x, p["wqkv"], gqkv, g["wqkv"], g["bqkv"], need_input_grad)


def sinusoid_table(length: int, d_model: int) -> np.ndarray:
    """``(length, d_model)`` table: ``sin(pos/10000^(2i/D))`` at even, ``cos`` at odd columns."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    div = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    table = np.zeros((length, d_model))
    table[:, 0::2] = np.sin(pos * div)
    table[:, 1::2] = np.cos(pos * div[: d_model // 2])
    return table


@register_layer
class SinusoidalPositionalEncoding(Layer):
    """Adds the fixed sine/cosine table of Vaswani et al. to ``(S, D)`` inputs; no parameters."""

    type_name = "sinusoidal_position"

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise NNConfigError(f"sinusoidal_position expects (tokens, d_model) inputs, got {input_shape}")
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def constant_elements(self) -> int:
        return math.prod(self.input_shape)  # the (S, D) table

    def bind(self, backend, params, grads, state):
        super().bind(backend, params, grads, state)
        self._table = backend.asarray(sinusoid_table(*self.input_shape))

    def forward(self, x, training):
        return self.backend.add_broadcast(x, self._table)

    def backward(self, gy, need_input_grad=True):
        return gy if need_input_grad else None


@register_layer
class LearnablePositionalEncoding(Layer):
    """Adds a learned ``(S, D)`` table (zero-initialised, so training starts from no position signal)."""

    type_name = "learnable_position"

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise NNConfigError(f"learnable_position expects (tokens, d_model) inputs, got {input_shape}")
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def param_specs(self):
        return [ParamSpec("table", self.input_shape, "zeros")]

    def forward(self, x, training):
        return self.backend.add_broadcast(x, self.params["table"])

    def backward(self, gy, need_input_grad=True):
        self.backend.sum_batch(gy, self.grads["table"])
        return gy if need_input_grad else None


@register_layer
class Patching(Layer):
    """PatchTST patching: ``(L,)`` -> ``(P, patch_len)``, windows every ``stride`` points.

    The series is end-padded with ``padding`` copies of its last value first (default ``stride``, as in the
    official code), giving ``P = (L + padding − patch_len)//stride + 1`` patches (12 for L=96, 16, 8).
    """

    type_name = "patching"

    def __init__(self, patch_len: int = 16, stride: int = 8, padding: int | None = None) -> None:
        super().__init__()
        self.patch_len, self.stride = patch_len, stride
        self.padding = stride if padding is None else padding

    def build(self, input_shape):
        if len(input_shape) != 1:
            raise NNConfigError(f"patching expects one series per sample (L,), got {input_shape}")
        length = input_shape[0]
        if self.patch_len < 1 or self.stride < 1 or self.padding < 0:
            raise NNConfigError("patching: patch_len and stride must be >= 1 and padding >= 0")
        if length + self.padding < self.patch_len:
            raise NNConfigError(f"patching: {length} points are fewer than patch_len {self.patch_len}")
        n_patches = (length + self.padding - self.patch_len) // self.stride + 1
        self.input_shape, self.output_shape = (length,), (n_patches, self.patch_len)
        return self.output_shape

    def forward(self, x, training):
        return self.backend.patch_forward(x, self.patch_len, self.stride, self.padding)

    def backward(self, gy, need_input_grad=True):
        return self.backend.patch_backward(gy, self.input_shape[0], self.stride) if need_input_grad else None


@register_layer
class TokenLinear(Layer):
    """Dense map over the LAST axis of an N-D input (tokens keep their positions); bias optional;
    ``init``: ``"xavier"`` or ``"torch"`` (``nn.init.INIT_SCHEMES``)."""

    type_name = "token_linear"

    def __init__(self, units: int, bias: bool = True, init: str = "xavier") -> None:
        super().__init__()
        self.units, self.bias = units, bias
        self.init = check_scheme(self.type_name, init)

    def build(self, input_shape):
        self.input_shape = tuple(input_shape)
        self.output_shape = (*self.input_shape[:-1], self.units)
        return self.output_shape

    def param_specs(self):
        i = self.input_shape[-1]
        specs = [weight_spec("w", (self.units, i), self.init, i, self.units)]
        return [*specs, bias_spec("b", (self.units,), self.init, i)] if self.bias else specs

    def forward(self, x, training):
        self._x = x
        return self.backend.linear_forward(x, self.params["w"], self.params.get("b"))

    def backward(self, gy, need_input_grad=True):
        return self.backend.linear_backward(
            self._x, self.params["w"], gy, self.grads["w"], self.grads.get("b"), need_input_grad
        )


@register_layer
class FeedForward(Layer):
    """Position-wise MLP ``(S, D) -> (S, D)``: linear to ``d_ff``, activation, dropout, linear, dropout;
    ``init``: ``"xavier"`` or ``"torch"`` (the official code's kernel-1 ``Conv1d`` pair starts as linears)."""

    type_name = "feedforward"

    def __init__(
        self,
        d_ff: int = 2048,
        activation: str = "gelu",
        dropout: float = 0.0,
        seed: int = 0,
        init: str = "xavier",
    ):
        super().__init__()
        self.d_ff, self.activation, self.dropout, self.seed = d_ff, activation, dropout, seed
        self.init = check_scheme(self.type_name, init)
        self._act = Activation.of(activation)
        self._drop1, self._drop2 = DropoutMask(dropout, seed), DropoutMask(dropout, seed + 1)

    def build(self, input_shape):
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def param_specs(self):
        d, f, init = self.input_shape[-1], self.d_ff, self.init
        return [
            weight_spec("w1", (f, d), init, d, f),
            bias_spec("b1", (f,), init, d),
            weight_spec("w2", (d, f), init, f, d),
            bias_spec("b2", (d,), init, f),
        ]

    def forward(self, x, training):
        be, p = self.backend, self.params
        z = be.linear_forward(x, p["w1"], p["b1"])  # (..., F)
        h = be.activation_forward(z, self._act)
        hd, m1 = self._drop1.apply(be, h, training)
        y = be.linear_forward(hd, p["w2"], p["b2"])  # (..., D)
        yd, m2 = self._drop2.apply(be, y, training)
        self._cache = (x, z, h, hd, m1, m2)
        return yd

    @property
    def counter(self) -> int:
        return self._drop1.counter

    @counter.setter
    def counter(self, value: int) -> None:
        self._drop1.counter = self._drop2.counter = value

    def backward(self, gy, need_input_grad=True):
        be, p, g = self.backend, self.params, self.grads
        x, z, h, hd, m1, m2 = self._cache
        gy = DropoutMask.grad(be, gy, m2)
        ghd = be.linear_backward(hd, p["w2"], gy, g["w2"], g["b2"], True)
        gz = be.activation_backward(z, h, DropoutMask.grad(be, ghd, m1), self._act)
        return be.linear_backward(x, p["w1"], gz, g["w1"], g["b1"], need_input_grad)


@register_layer
class TransformerEncoderLayer(Composite):
    """One post-norm encoder layer over ``(S, D)``: ``x = LN1(x + drop(MHA(x)))``; ``LN2(x + FFN(x))``.

    The layout of PyTorch's ``nn.TransformerEncoderLayer`` (norm_first=False) and of the PatchTST/ATFNet
    encoder: dropout on the attention weights, after the attention output and twice inside the FFN.
    ``init`` (``"xavier"``/``"torch"``, ``nn.init.INIT_SCHEMES``) reaches the attention and the FFN.
    """

    type_name = "transformer_encoder_layer"

    def __init__(
        self,
        n_heads: int = 8,
        d_ff: int = 2048,
        dropout: float = 0.1,
        activation: str = "gelu",
        causal: bool = False,
        eps: float = 1e-5,
        seed: int = 0,
        init: str = "xavier",
    ) -> None:
        super().__init__()
        self.n_heads, self.d_ff, self.dropout, self.activation = n_heads, d_ff, dropout, activation
        self.causal, self.eps, self.seed, self.init = causal, eps, seed, init
        self.children = {
            "attn": MultiHeadSelfAttention(n_heads, causal, dropout, seed, init),
            "norm1": LayerNorm(eps),
            "ffn": FeedForward(d_ff, activation, dropout, seed + 2, init),
            "norm2": LayerNorm(eps),
        }
        self._drop = DropoutMask(dropout, seed + 4)

    def build(self, input_shape):
        for child in self.children.values():
            child.build(tuple(input_shape))
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def forward(self, x, training):
        be, c = self.backend, self.children
        a, self._mask = self._drop.apply(be, c["attn"].forward(x, training), training)
        x1 = c["norm1"].forward(be.add(x, a), training)
        return c["norm2"].forward(be.add(x1, c["ffn"].forward(x1, training)), training)

    def backward(self, gy, need_input_grad=True):
        be, c = self.backend, self.children
        g1 = c["norm2"].backward(gy)  # reaches x1 directly and through the FFN
        g1 = be.add(g1, c["ffn"].backward(g1))
        g0 = c["norm1"].backward(g1)  # reaches x directly and through attention
        ga = c["attn"].backward(DropoutMask.grad(be, g0, self._mask), need_input_grad)
        return be.add(g0, ga) if need_input_grad else None
