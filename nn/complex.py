"""Complex-valued layers: the building blocks of ATFNet's frequency (F) block.

Every complex tensor of logical shape ``S`` is stored as a real tensor ``(*S, 2)`` = (Re, Im) pairs, batch
first; per-sample shapes given to ``build`` include the trailing 2. Complex parameters are stored the same
way, so the flat-buffer optimizers update Re and Im as two reals — exactly gradient descent on ``(Re, Im)``.

Gradients: the gradient delivered for a complex ``z`` is ``∂L/∂Re z + i·∂L/∂Im z`` (see
``nn.complex_ops_numpy``). The MQL5 port (seed 003, "Neural networks made easy, part 92") applies the
holomorphic chain rule to non-holomorphic functions; every layer here is instead verified by finite
differences on Re and Im separately.

Layers (type names for ``from_config`` in brackets):
- ``ComplexDense`` [complex_dense] — ``y = x·wᵀ + b`` over the last complex axis.
- ``ComplexActivation`` [complex_activation] — split ReLU / split leaky ReLU, complex tanh / sigmoid.
- ``ComplexDropout`` [complex_dropout] — one mask per complex element (Re and Im dropped together).
- ``ComplexLayerNorm`` [complex_layernorm] — complex mean, real variance of ``|z − mean|²``, complex affine.
- ``ComplexMultiHeadAttention`` [complex_mha] — self-attention with the ``modulus`` score softmax (official
  ATFNet code, default) or the ``holomorphic`` complex softmax (MQL5 port); optional causal mask.
- ``ComplexEncoderLayer`` [complex_encoder_layer] — attention + complex FFN (split ReLU), residuals,
  post-norm, as in the official ``ComplexEncoderLayer``.
"""

from __future__ import annotations

from typing import ClassVar

from nn.attention import Composite
from nn.backend import Tensor
from nn.complex_ops_numpy import COMPLEX_ACTIVATIONS, SCORE_MODES
from nn.errors import NNConfigError
from nn.init import INIT_SCHEMES, bias_spec, check_scheme, weight_spec
from nn.layer import INITIALISERS, Layer, ParamSpec
from nn.layers import Dropout, DropoutMask, DropsWeights, register_layer


def _complex_input(layer: str, input_shape: tuple[int, ...], min_rank: int = 2) -> None:
    if len(input_shape) < min_rank or input_shape[-1] != 2:
        raise NNConfigError(
            f"{layer}: input shape {input_shape} is not complex: expected (..., 2) holding (Re, Im) pairs"
            f" with at least {min_rank - 1} complex axis/axes"
        )


@register_layer
class ComplexDense(Layer):
    """Complex affine map over the last complex axis: ``(*lead, I) -> (*lead, units)``.

    One complex weight ``w (units, I)`` and bias ``b (units,)``. The official ATFNet ``ComplexLinear`` builds
    the same map from two real ``nn.Linear`` (its bias is a reparametrised complex bias). ``init``:
    ``"xavier"`` (Xavier-uniform on Re and Im each, with fans doubled so that ``E|w|²`` equals the real
    Xavier variance; zero bias), ``"torch"`` (the official pair of ``nn.Linear`` at PyTorch's defaults:
    Re and Im ``U(±1/√I)``, bias ``(b_r − b_i) + i(b_r + b_i)``), or any ``nn.layer.INITIALISERS`` name
    for the weight with a zero bias.
    """

    type_name: ClassVar[str] = "complex_dense"

    def __init__(self, units: int, use_bias: bool = True, init: str = "xavier") -> None:
        super().__init__()
        if units < 1:
            raise NNConfigError(f"complex_dense: units must be >= 1, got {units}")
        if init not in INIT_SCHEMES + INITIALISERS:
            known = ", ".join(INIT_SCHEMES + INITIALISERS)
            raise NNConfigError(f"complex_dense: init must be one of {known}, got {init!r}")
        self.units, self.use_bias, self.init = units, use_bias, init
        self._x: Tensor | None = None

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        _complex_input("complex_dense", input_shape)
        self.input_shape = tuple(input_shape)
        self.output_shape = (*input_shape[:-2], self.units, 2)
        return self.output_shape

    def param_specs(self) -> list[ParamSpec]:
        n_in, units = self.input_shape[-2], self.units
        if self.init in INIT_SCHEMES:
            specs = [_complex_weight("w", (units, n_in, 2), self.init, n_in, units)]
        else:
            specs = [ParamSpec("w", (units, n_in, 2), self.init, fan_in=2 * n_in, fan_out=2 * units)]
        if self.use_bias:
            specs.append(bias_spec("b", (units, 2), self.init, n_in, complex_=True))
        return specs

    def forward(self, x: Tensor, training: bool) -> Tensor:
        n_in = self.input_shape[-2]
        self._x = x.reshape(-1, n_in, 2)  # (B·lead, I, 2)
        y = self.backend.complex_dense_forward(self._x, self.params["w"], self.params.get("b"))
        return y.reshape(x.shape[0], *self.output_shape)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        g = gy.reshape(-1, self.units, 2)  # (B·lead, O, 2)
        gx = self.backend.complex_dense_backward(
            self._x, self.params["w"], g, self.grads["w"], self.grads.get("b"), need_input_grad
        )
        return None if gx is None else gx.reshape(gy.shape[0], *self.input_shape)


def _complex_weight(name: str, shape: tuple[int, ...], init: str, n_in: int, n_out: int) -> ParamSpec:
    """A complex weight under a scheme: Xavier fans count Re and Im (doubled), PyTorch's count the inputs
    of one real ``nn.Linear`` of the official pair."""
    if init == "torch":
        return weight_spec(name, shape, init, n_in, n_out)
    return weight_spec(name, shape, init, 2 * n_in, 2 * n_out)


@register_layer
class ComplexActivation(Layer):
    """Elementwise complex activation, any complex shape.

    ``relu`` / ``lrelu``: applied to Re and Im separately ("split"; ``alpha`` = negative slope), as in the
    official code's ``complex_relu``. ``tanh`` / ``sigmoid``: the holomorphic functions of the MQL5 port —
    unbounded near their poles (``z = iπ/2 + ikπ`` for tanh), so keep pre-activations moderate.
    """

    type_name: ClassVar[str] = "complex_activation"

    def __init__(self, kind: str = "relu", alpha: float = 0.01) -> None:
        super().__init__()
        if kind not in COMPLEX_ACTIVATIONS:
            raise NNConfigError(
                f"complex_activation: unknown kind {kind!r}: expected one of {', '.join(COMPLEX_ACTIVATIONS)}"
            )
        self.kind, self.alpha = kind, alpha
        self._x: Tensor | None = None
        self._y: Tensor | None = None

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        _complex_input("complex_activation", input_shape, min_rank=1)
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def forward(self, x: Tensor, training: bool) -> Tensor:
        self._x = x
        self._y = self.backend.complex_activation_forward(x, self.kind, self.alpha)
        return self._y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        return self.backend.complex_activation_backward(self._x, self._y, gy, self.kind, self.alpha)


@register_layer
class ComplexDropout(Dropout):
    """Inverted dropout with ONE keep/drop draw per complex element (Re and Im share it), training only.

    Masks come from ``uniform01(seed, counter, index)`` with a counter that advances every training
    forward, so both backends draw the same masks and a run is reproducible. A subclass of ``Dropout``:
    ``seed=None`` lets the model derive a distinct seed from its own, and model files keep the counter.
    """

    type_name: ClassVar[str] = "complex_dropout"

    def __init__(self, rate: float = 0.1, seed: int | None = None) -> None:
        super().__init__(rate, seed)

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        _complex_input("complex_dropout", input_shape, min_rank=1)
        return super().build(input_shape)

    def forward(self, x: Tensor, training: bool) -> Tensor:
        y, self._mask = self.apply(self.backend, x, training, pairs=True)
        return y

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        if not need_input_grad:
            return None
        return gy if self._mask is None else self.backend.complex_scale(gy, self._mask)


@register_layer
class ComplexLayerNorm(Layer):
    """Layer normalization over the last complex axis D: ``y = w·(z − μ)/√(mean|z − μ|² + eps) + b``.

    ``μ`` is the complex mean, the variance is real, ``w`` and ``b`` are complex (complex product). The
    official ``ComplexLN`` uses the unbiased variance without eps and initialises ``w = (1+i)/√2``; here the
    variance is biased with ``eps`` (no division by zero on constant rows) and ``w`` starts at ``1+i``
    (``init="xavier"``, modulus √2) or at the official ``(1+i)/√2`` (``init="torch"``). No switch for the
    official variance: it only rescales ``ẑ`` by the constant ``√((D−1)/D)``, which ``w`` absorbs (official
    with ``w`` = this layer with ``w·√((D−1)/D)``, up to eps), so both describe the same family of maps.
    """

    type_name: ClassVar[str] = "complex_layernorm"

    def __init__(self, eps: float = 1e-5, init: str = "xavier") -> None:
        super().__init__()
        if eps <= 0:
            raise NNConfigError(f"complex_layernorm: eps must be > 0, got {eps}")
        self.eps, self.init = eps, check_scheme(self.type_name, init)
        self._xhat: Tensor | None = None
        self._inv_std: Tensor | None = None

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        _complex_input("complex_layernorm", input_shape)
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def param_specs(self) -> list[ParamSpec]:
        d = self.input_shape[-2]
        return [ParamSpec("w", (d, 2), "complex_unit" if self.init == "torch" else "ones"),
                ParamSpec("b", (d, 2), "zeros")]  # fmt: skip

    def forward(self, x: Tensor, training: bool) -> Tensor:
        d = self.input_shape[-2]
        y, self._xhat, self._inv_std = self.backend.complex_layernorm_forward(
            x.reshape(-1, d, 2), self.params["w"], self.params["b"], self.eps
        )
        return y.reshape(x.shape)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        d = self.input_shape[-2]
        gx = self.backend.complex_layernorm_backward(
            gy.reshape(-1, d, 2),
            self._xhat,
            self._inv_std,
            self.params["w"],
            self.grads["w"],
            self.grads["b"],
        )
        return gx.reshape(gy.shape)


@register_layer
class ComplexMultiHeadAttention(DropsWeights, Layer):
    """Complex multi-head self-attention over tokens: ``(N, d) -> (N, d)`` (complex).

    ``Q, K, V = x·W_qkvᵀ + b`` (one fused complex dense), per head ``s_ij = Σ_e q_ie·k_je`` (unconjugated),
    then ``score``:
    - ``"modulus"`` (default; official ATFNet code): ``p = softmax_j |s_ij|`` — real weights, no 1/√E.
    - ``"holomorphic"`` (MQL5 port): ``p = e_ij / Σ_j e_ij`` with ``e = exp(s/√E)``, Re of the exponent
      clamped to ±20 — complex weights.
    ``out_i = Σ_j p_ij·v_j``, heads concatenated, then the output complex dense. ``causal`` lets token i see
    tokens j ≤ i only. ``dropout`` drops attention weights in training (inverted dropout, counter-based
    masks from ``seed``), as the official ``ComplexAttention`` does. This is standard attention ACROSS
    tokens; the official ATFNet code instead attends across feature slots inside each token
    (``nn.atfnet.ComplexFeatureAttention``, built on the same ops). ``init``: ``"xavier"`` or ``"torch"``
    (the official four ``ComplexLinear`` projections at PyTorch's defaults).
    """

    type_name: ClassVar[str] = "complex_mha"

    def __init__(
        self,
        heads: int = 8,
        score: str = "modulus",
        causal: bool = False,
        dropout: float = 0.0,
        seed: int = 0,
        init: str = "xavier",
    ) -> None:
        super().__init__()
        self._drop = DropoutMask(dropout, seed, "attention dropout")
        self.dropout, self.seed = dropout, seed
        self.init = check_scheme(self.type_name, init)
        if score not in SCORE_MODES:
            raise NNConfigError(
                f"complex_mha: unknown score {score!r}: expected one of {', '.join(SCORE_MODES)}"
            )
        if heads < 1:
            raise NNConfigError(f"complex_mha: heads must be >= 1, got {heads}")
        self.heads, self.score, self.causal = heads, score, causal
        self._cache: tuple[Tensor, ...] = ()

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 3 or input_shape[-1] != 2:
            raise NNConfigError(f"{self.type_name}: input shape {input_shape} must be (tokens, d_model, 2)")
        if input_shape[1] % self.heads:
            raise NNConfigError(
                f"{self.type_name}: d_model {input_shape[1]} is not divisible by heads {self.heads}"
            )
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def param_specs(self) -> list[ParamSpec]:
        d, init = self.input_shape[1], self.init
        return [
            _complex_weight("w_qkv", (3 * d, d, 2), init, d, d),
            bias_spec("b_qkv", (3 * d, 2), init, d, complex_=True),
            _complex_weight("w_out", (d, d, 2), init, d, d),
            bias_spec("b_out", (d, 2), init, d, complex_=True),
        ]

    # The attention op takes (batch, tokens, 3·heads·E, 2) or (batch, 3, tokens, heads·E, 2). Attention across
    # tokens hands it the samples as the batch and the layer's tokens as its tokens; a subclass may regroup
    # the projected features otherwise (``nn.atfnet.ComplexFeatureAttention``: each token's feature slots
    # become the op's tokens).
    def _to_heads(self, qkv: Tensor, samples: int) -> Tensor:
        """The fused projection ``(samples·N, 3d, 2)`` in the attention op's layout."""
        n, d, _ = self.input_shape
        return qkv.reshape(samples, n, 3 * d, 2)

    def _from_heads(self, gqkv: Tensor, samples: int) -> Tensor:
        """The inverse of ``_to_heads``: the op's gradient back to ``(samples·N, 3d, 2)``."""
        n, d, _ = self.input_shape
        return gqkv.reshape(samples * n, 3 * d, 2)

    def forward(self, x: Tensor, training: bool) -> Tensor:
        be, p, (n, d, _) = self.backend, self.params, self.input_shape
        samples = x.shape[0]
        xf = x.reshape(samples * n, d, 2)  # (B·N, d, 2)
        qkv = self._to_heads(be.complex_dense_forward(xf, p["w_qkv"], p["b_qkv"]), samples)
        rows, tokens = qkv.shape[0], qkv.shape[-3]  # the op's tokens in either of its layouts
        mask = self._drop.draw(be, (rows, self.heads, tokens, tokens), training)
        att, s, pr = be.complex_attention_forward(qkv, self.heads, self.score, self.causal, mask)
        att = att.reshape(samples * n, d, 2)  # (B·N, d, 2): heads concatenated
        self._cache = (xf, qkv, s, pr, att, mask)
        return be.complex_dense_forward(att, p["w_out"], p["b_out"]).reshape(x.shape)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        be, p, g, (n, d, _) = self.backend, self.params, self.grads, self.input_shape
        samples = gy.shape[0]
        xf, qkv, s, pr, att, mask = self._cache
        gy = gy.reshape(samples * n, d, 2)
        gatt = be.complex_dense_backward(att, p["w_out"], gy, g["w_out"], g["b_out"], True)
        gatt = gatt.reshape(qkv.shape[0], qkv.shape[-3], -1, 2)  # the op's layout of its output
        gqkv = be.complex_attention_backward(qkv, s, pr, gatt, self.heads, self.score, self.causal, mask)
        gqkv = self._from_heads(gqkv, samples)
        gx = be.complex_dense_backward(xf, p["w_qkv"], gqkv, g["w_qkv"], g["b_qkv"], need_input_grad)
        return None if gx is None else gx.reshape(samples, n, d, 2)


@register_layer
class ComplexEncoderLayer(Composite):
    """One complex transformer encoder layer (post-norm), as in the official ATFNet ``ComplexEncoderLayer``:

    ``h = LN1(x + drop(MHA(x)))``; ``y = LN2(h + drop(W2·drop(splitReLU(W1·h))))``, W1: d -> d_ff,
    W2: d_ff -> d. Input and output ``(tokens, d_model, 2)``. Parameters are named ``attn.*``, ``norm1.*``,
    ``ff1.*``, ``ff2.*``, ``norm2.*``. The attention weights are dropped at ``attn_dropout`` (``None``: the
    same rate as ``dropout``; the official code fixes it at 0.1). The three dropouts use seeds ``seed``,
    ``seed + 1``, ``seed + 2`` and the attention ``seed + 3``: give stacked layers seeds at least 4 apart so
    that their masks are independent. ``init`` (``"xavier"``/``"torch"``) reaches every parametrised child.
    """

    type_name: ClassVar[str] = "complex_encoder_layer"

    def __init__(
        self,
        heads: int = 8,
        d_ff: int = 2048,
        dropout: float = 0.1,
        score: str = "modulus",
        causal: bool = False,
        eps: float = 1e-5,
        seed: int = 0,
        attn_dropout: float | None = None,
        init: str = "xavier",
    ) -> None:
        super().__init__()
        if d_ff < 1:
            raise NNConfigError(f"complex_encoder_layer: d_ff must be >= 1, got {d_ff}")
        self.heads, self.d_ff, self.dropout, self.score = heads, d_ff, dropout, score
        self.causal, self.eps, self.seed, self.attn_dropout = causal, eps, seed, attn_dropout
        self.init = check_scheme(self.type_name, init)
        # The chain in forward order; parameters are named after the parametrised children.
        self.children = {
            "attn": self._attention(),
            "drop1": ComplexDropout(dropout, seed),
            "norm1": ComplexLayerNorm(eps, init),
            "ff1": ComplexDense(d_ff, init=init),
            "act": ComplexActivation("relu"),
            "drop2": ComplexDropout(dropout, seed + 1),
            "ff2": ComplexDense(1, init=init),  # placeholder until build knows d_model
            "drop3": ComplexDropout(dropout, seed + 2),
            "norm2": ComplexLayerNorm(eps, init),
        }

    def _attention(self) -> Layer:
        """The token-mixing attention (subclasses substitute theirs); dropout seed ``seed + 3``."""
        return ComplexMultiHeadAttention(
            self.heads, self.score, self.causal, self._attn_rate, self.seed + 3, self.init
        )

    @property
    def _attn_rate(self) -> float:
        return self.dropout if self.attn_dropout is None else self.attn_dropout

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.input_shape = self.output_shape = tuple(input_shape)
        self.children["attn"].build(input_shape)  # validates (tokens, d_model, 2)
        self.children["ff2"] = ComplexDense(input_shape[1], init=self.init)
        shape = tuple(input_shape)
        for name, child in self.children.items():
            shape = child.build(shape) if name != "attn" else shape
        return self.output_shape

    def forward(self, x: Tensor, training: bool) -> Tensor:
        be, c = self.backend, self.children
        a = c["drop1"].forward(c["attn"].forward(x, training), training)
        h = c["norm1"].forward(be.complex_add(x, a), training)
        f = c["drop2"].forward(c["act"].forward(c["ff1"].forward(h, training), training), training)
        f = c["drop3"].forward(c["ff2"].forward(f, training), training)
        return c["norm2"].forward(be.complex_add(h, f), training)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        be, c = self.backend, self.children
        gsum = c["norm2"].backward(gy)  # reaches h directly and through the FFN
        gf = c["ff2"].backward(c["drop3"].backward(gsum))
        gf = c["ff1"].backward(c["act"].backward(c["drop2"].backward(gf)))
        gh = c["norm1"].backward(be.complex_add(gsum, gf))
        ga = c["attn"].backward(c["drop1"].backward(gh), need_input_grad)
        return be.complex_add(gh, ga) if need_input_grad else None
