"""ATFNet (Ye et al. 2024, arXiv 2404.05192; seed 003): a time block and a frequency block, mixed per window.

Shapes: the models take ``x (B, L, C)`` (L past points of C channels) and return ``(B, T, C)`` (the next T
points). Every channel is forecast on its own ("channel independence"): internally the batch becomes
``B·C`` rows of one series each.

- T block = PatchTST (Nie et al. 2023): RevIN, patches of 16 every 8 points (end-padded with the last value),
  linear patch embedding without bias + sinusoidal positions, post-norm transformer encoder with GELU FFN,
  final LayerNorm, flatten head to T points, RevIN de-normalisation.
- F block: extended DFT (length L+T basis on the L points) -> spectrum normalisation -> complex embedding of
  the F bins to ``d_model`` -> complex encoder layers -> complex projection back to F bins -> de-normalise ->
  inverse DFT, last T points.
- Mix: ``y = w·y_F + (1 − w)·y_T`` with the harmonic-energy weight ``w`` of each input window (no gradient).

Defaults follow the official implementation (github YHYHYHYHYHY/ATFNet): d_model 512, 8 heads, 2 layers,
d_ff 2048, dropout 0.1 in both blocks (the F block's attention weights included), RevIN without affine.
``init="torch"`` starts every weight where the official PyTorch modules start theirs (``nn.init``'s
``"torch"`` scheme: ``nn.Linear``/``Conv1d`` defaults, the official ``ComplexLN`` weight ``(1+i)/√2``);
the default ``"xavier"`` keeps Xavier weights, zero biases and complex layer norm weights ``1+i``.
Deliberate differences: the inverse DFT always has length L+T (the official ``irfft`` default loses a
point when L+T is odd); the F block's inverse DFT multiplies the spectrum back by N = L+T, the exact
inverse of the forward DFT's 1/N, where the official code multiplies by the number of bins F
(``f_scaling="official"`` reproduces that: the F block's output times F/N).

Complex attention, official layout: the projected ``d_model`` features of a row are viewed as ``(d_model/H,
H)``; each head attends across the ``d_model/H`` feature slots (width-1 keys/values), with
``softmax(|q·k|)`` and no 1/√d scaling. ``ComplexFeatureAttention`` reproduces exactly that.
"""

from __future__ import annotations

from nn.attention import (
    Composite,
    LayerNorm,
    Patching,
    SinusoidalPositionalEncoding,
    TokenLinear,
    TransformerEncoderLayer,
    _layer,
)
from nn.complex import ComplexDense, ComplexDropout, ComplexEncoderLayer, ComplexMultiHeadAttention
from nn.errors import NNConfigError
from nn.init import check_scheme
from nn.layer import Layer, ParamSpec
from nn.layers import DropoutMask, register_layer
from nn.spectral import (
    ExtendedDFT,
    InverseExtendedDFT,
    SpectrumNorm,
    harmonic_weight,
    inverse_extended_dft_basis,
)

F_SCALINGS = ("exact", "official")


@register_layer
class ChannelIndependent(Composite):
    """Runs ``layers`` (one series ``(L,)`` -> ``(T,)``) on every channel of ``(L, C)`` inputs -> ``(T, C)``.

    With ``revin`` each window is normalised by its own mean and standard deviation first and the output is
    mapped back (RevIN, Kim et al. 2022), optionally with a learned per-channel ``affine`` map. ``backward``
    returns the exact input gradient, including the paths through the window's mean and standard deviation
    (both maps use them), so the layer may follow trainable layers. Parameter gradients do not depend on
    those paths: in ATFNet, where the raw window comes first, they match the official code (which detaches
    the mean) exactly.
    """

    type_name = "channel_independent"

    def __init__(self, layers: list, revin: bool = False, affine: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        if not layers:
            raise NNConfigError(f"{self.type_name}: needs at least one inner layer")
        self.revin, self.affine, self.eps = revin, affine, eps
        if affine and not revin:
            raise NNConfigError(f"{self.type_name}: affine=True needs revin=True")
        self.children = {str(i): _layer(spec) for i, spec in enumerate(layers)}

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise NNConfigError(f"{self.type_name} expects (length, channels) inputs, got {input_shape}")
        shape: tuple[int, ...] = (input_shape[0],)
        for child in self.children.values():
            shape = tuple(child.build(shape))
        if len(shape) != 1:
            raise NNConfigError(f"{self.type_name}: inner layers must end with one series (T,), got {shape}")
        self.input_shape, self.output_shape = tuple(input_shape), (shape[0], input_shape[1])
        return self.output_shape

    def own_param_specs(self):
        if not self.affine:
            return []
        c = self.input_shape[1]
        return [ParamSpec("gamma", (c,), "ones"), ParamSpec("beta", (c,), "zeros")]

    def forward(self, x, training):
        be, p = self.backend, self.params
        b, length, c = x.shape
        h = be.permute(x, (0, 2, 1)).reshape(b * c, length)  # (B·C, L): one row per series
        if self.revin:
            self._mean, self._std = be.revin_stats(h, self.eps)
            h = self._xn = be.revin_normalize(h, self._mean, self._std)  # (B·C, L)
            if self.affine:
                self._xa = be.channel_affine_forward(h.reshape(b, c, length), p["gamma"], p["beta"], False)
                h = self._xa.reshape(b * c, length)
        for child in self.children.values():
            h = child.forward(h, training)
        t = h.shape[1]
        if self.revin:
            if self.affine:
                self._ya = h.reshape(b, c, t)
                self._yi = be.channel_affine_forward(self._ya, p["gamma"], p["beta"], True)
                h = self._yi.reshape(b * c, t)
            self._h = h  # (B·C, T): what de-normalisation maps back
            h = be.revin_denormalize(h, self._mean, self._std)
        return be.permute(h.reshape(b, c, t), (0, 2, 1))  # (B, T, C)

    def backward(self, gy, need_input_grad=True):
        be, p, g = self.backend, self.params, self.grads
        b, t, c = gy.shape
        h = be.permute(gy, (0, 2, 1)).reshape(b * c, t)  # (B·C, T)
        if self.revin:
            h, g_mean, g_std = be.revin_denorm_backward(h, self._h, self._std)
            if self.affine:
                # gamma/beta act twice (after normalising, inverted before de-normalising): sum both parts
                gg, gb = be.zeros((c,)), be.zeros((c,))
                h = h.reshape(b, c, t)
                h = be.channel_affine_backward(h, self._ya, self._yi, p["gamma"], True, gg, gb)
                h = h.reshape(b * c, t)
        children = list(self.children.values())
        for i, child in enumerate(reversed(children)):
            first = i == len(children) - 1
            h = child.backward(h, need_input_grad or not first or (self.revin and self.affine))
        if self.revin and self.affine:
            length = self.input_shape[0]
            xn = self._xn.reshape(b, c, length)
            h = be.channel_affine_backward(
                h.reshape(b, c, length), xn, self._xa, p["gamma"], False, g["gamma"], g["beta"]
            )
            be.add_(g["gamma"], gg)
            be.add_(g["beta"], gb)
            h = h.reshape(b * c, length)
        if not need_input_grad:
            return None
        if self.revin:
            h = be.revin_norm_backward(h, self._xn, self._std, g_mean, g_std)
        return be.permute(h.reshape(b, c, -1), (0, 2, 1))  # (B, L, C)

    def config(self):
        return {
            "type": self.type_name,
            "layers": [child.config() for child in self.children.values()],
            "revin": self.revin,
            "affine": self.affine,
            "eps": self.eps,
        }


@register_layer
class RevIN(ChannelIndependent):
    """``ChannelIndependent`` with reversible instance normalisation on (the default here)."""

    type_name = "revin"

    def __init__(self, layers: list, revin: bool = True, affine: bool = False, eps: float = 1e-5) -> None:
        super().__init__(layers, revin, affine, eps)


@register_layer
class PatchTSTBackbone(Composite):
    """PatchTST on one normalised series: ``(L,)`` -> ``(T,)`` (patching, encoder, flatten head)."""

    type_name = "patchtst_backbone"

    def __init__(
        self,
        pred_len: int,
        d_model: int = 512,
        n_heads: int = 8,
        e_layers: int = 2,
        d_ff: int = 2048,
        dropout: float = 0.1,
        patch_len: int = 16,
        stride: int = 8,
        activation: str = "gelu",
        seed: int = 0,
        init: str = "xavier",
    ) -> None:
        super().__init__()
        self.pred_len, self.d_model, self.n_heads, self.e_layers = pred_len, d_model, n_heads, e_layers
        self.d_ff, self.dropout, self.patch_len, self.stride = d_ff, dropout, patch_len, stride
        self.activation, self.seed, self.init = activation, seed, check_scheme(self.type_name, init)
        self.children = {
            "patch": Patching(patch_len, stride),
            "embed": TokenLinear(d_model, bias=False, init=init),
            "pos": SinusoidalPositionalEncoding(),
        }
        for i in range(e_layers):
            self.children[f"enc{i}"] = TransformerEncoderLayer(
                n_heads, d_ff, dropout, activation, seed=seed + 8 * (i + 1), init=init
            )
        self.children["norm"] = LayerNorm()
        self.children["head"] = TokenLinear(pred_len, init=init)
        self._drop_in, self._drop_out = DropoutMask(dropout, seed + 1), DropoutMask(dropout, seed + 2)

    def build(self, input_shape):
        if len(input_shape) != 1:
            raise NNConfigError(f"patchtst_backbone expects one series (L,), got {input_shape}")
        shape = tuple(input_shape)
        for name, child in self.children.items():
            if name == "head":
                shape = (shape[0] * shape[1],)  # (P, D) -> (D·P,), flattened d_model-major
            shape = child.build(shape)
        self.input_shape, self.output_shape = tuple(input_shape), (self.pred_len,)
        return self.output_shape

    def forward(self, x, training):
        be, c = self.backend, self.children
        h = c["pos"].forward(c["embed"].forward(c["patch"].forward(x, training), training), training)
        h, self._m_in = self._drop_in.apply(be, h, training)  # (N, P, D)
        for i in range(self.e_layers):
            h = c[f"enc{i}"].forward(h, training)
        h = c["norm"].forward(h, training)
        n, p, d = h.shape
        h = be.permute(h, (0, 2, 1)).reshape(n, d * p)  # (N, D·P): the head sees each feature's patches
        y, self._m_out = self._drop_out.apply(be, c["head"].forward(h, training), training)
        return y  # (N, T)

    def backward(self, gy, need_input_grad=True):
        be, c = self.backend, self.children
        g = c["head"].backward(DropoutMask.grad(be, gy, self._m_out))  # (N, D·P)
        n = g.shape[0]
        p, d = c["norm"].input_shape
        g = be.permute(g.reshape(n, d, p), (0, 2, 1))  # (N, P, D)
        g = c["norm"].backward(g)
        for i in reversed(range(self.e_layers)):
            g = c[f"enc{i}"].backward(g)
        g = DropoutMask.grad(be, g, self._m_in)
        g = c["embed"].backward(c["pos"].backward(g), need_input_grad)
        return c["patch"].backward(g) if need_input_grad else None


@register_layer
class ComplexFeatureAttention(ComplexMultiHeadAttention):
    """The official ATFNet complex attention on ``(N, d, 2)``: per token, heads attend over feature slots.

    ``Q, K, V = x·W_qkvᵀ + b`` (complex, ``(N, 3d)``); each of Q/K/V is viewed as ``(d/H, H)`` (slot, head);
    head h forms ``s_ij = q_ih·k_jh`` over slots i, j, then ``p = softmax_j |s_ij|`` (``score="modulus"``)
    or the holomorphic complex softmax (``"holomorphic"``), ``out_ih = Σ_j p_ij·v_jh``, output projection.
    ``dropout`` drops the weights ``p`` in training, as the official ``ComplexAttention``. Tokens never mix:
    in ATFNet's F block every token is one channel's spectrum embedding.
    """

    type_name = "complex_feature_attention"

    def _to_heads(self, qkv, samples):
        """``(M, 3d, 2)`` -> ``(M, 3, d/H, H, 2)``: Q/K/V each viewed as (slot, head); slots are the tokens.
        A view: the op reads the three blocks in place."""
        n, d, _ = self.input_shape
        return qkv.reshape(samples * n, 3, d // self.heads, self.heads, 2)

    def _from_heads(self, gqkv, samples):
        n, d, _ = self.input_shape
        return gqkv.reshape(samples * n, 3 * d, 2)


@register_layer
class FeatureAttentionEncoderLayer(ComplexEncoderLayer):
    """``ComplexEncoderLayer`` (residuals, complex FFN with split ReLU, complex LayerNorm, post-norm) with the
    official feature-slot attention (``ComplexFeatureAttention``) in place of token attention."""

    type_name = "complex_feature_encoder_layer"

    def _attention(self) -> Layer:
        return ComplexFeatureAttention(
            self.heads, self.score, self.causal, self._attn_rate, self.seed + 3, self.init
        )


@register_layer
class FrequencyBlock(Composite):
    """ATFNet's F block on one series: ``(L,)`` -> ``(T,)`` through the spectrum of the extended window."""

    type_name = "atfnet_fblock"

    def __init__(
        self,
        pred_len: int,
        d_model: int = 512,
        n_heads: int = 8,
        layers: int = 2,
        d_ff: int = 2048,
        dropout: float = 0.1,
        score: str = "modulus",
        seed: int = 0,
        attn_dropout: float | None = None,
        f_scaling: str = "exact",
        init: str = "xavier",
    ) -> None:
        super().__init__()
        if f_scaling not in F_SCALINGS:
            raise NNConfigError(f"f_scaling must be one of {', '.join(F_SCALINGS)}, got {f_scaling!r}")
        self.f_scaling, self.init = f_scaling, check_scheme(self.type_name, init)
        self.pred_len, self.d_model, self.n_heads, self.layers = pred_len, d_model, n_heads, layers
        self.d_ff, self.dropout, self.score, self.seed = d_ff, dropout, score, seed
        self.attn_dropout = attn_dropout
        self.children = {
            "norm": SpectrumNorm(),
            "embed": ComplexDense(d_model, init=init),
            "drop": ComplexDropout(dropout, seed),
        }
        for i in range(layers):
            self.children[f"enc{i}"] = FeatureAttentionEncoderLayer(
                n_heads, d_ff, dropout, score, seed=seed + 8 * (i + 1), attn_dropout=attn_dropout, init=init
            )

    def build(self, input_shape):
        if len(input_shape) != 1:
            raise NNConfigError(f"atfnet_fblock expects one series (L,), got {input_shape}")
        length = input_shape[0]
        self._dft = ExtendedDFT(self.pred_len)
        bins = self._dft.build((length,))[0]  # F = (L + T)//2 + 1
        self._idft = InverseExtendedDFT(length, self.pred_len)
        self._idft.build((bins, 2))
        self.children["proj"] = ComplexDense(bins, init=self.init)
        self.children["norm"].build((bins, 2))
        shape: tuple[int, ...] = (1, bins, 2)  # one token per series
        for name in ("embed", "drop", *(f"enc{i}" for i in range(self.layers)), "proj"):
            shape = self.children[name].build(shape)
        self.input_shape, self.output_shape = tuple(input_shape), (self.pred_len,)
        return self.output_shape

    def constant_elements(self) -> int:
        return super().constant_elements() + self._dft.constant_elements() + self._idft.constant_elements()

    def bind(self, backend, params, grads, state):
        super().bind(backend, params, grads, state)
        self._dft.bind(backend, {}, {}, {})
        self._idft.bind(backend, {}, {}, {})
        if self.f_scaling == "official":  # irfft(X·F) instead of irfft(X·N): the output times F/N
            length = self.input_shape[0]
            basis = inverse_extended_dft_basis(length, self.pred_len)
            self._idft.basis = backend.asarray(basis * ((basis.shape[0] // 2) / (length + self.pred_len)))

    def _chain(self) -> list[Layer]:
        c = self.children
        return [c["embed"], c["drop"], *(c[f"enc{i}"] for i in range(self.layers)), c["proj"]]

    def forward(self, x, training):
        norm = self.children["norm"]
        spec = norm.forward(self._dft.forward(x, training), training)  # (M, F, 2)
        m, bins, _ = spec.shape
        h = spec.reshape(m, 1, bins, 2)
        for layer in self._chain():
            h = layer.forward(h, training)
        return self._idft.forward(norm.denormalize(h.reshape(m, bins, 2)), training)  # (M, T)

    def backward(self, gy, need_input_grad=True):
        norm = self.children["norm"]
        g = norm.denormalize_backward(self._idft.backward(gy))  # (M, F, 2)
        m, bins, _ = g.shape
        g = g.reshape(m, 1, bins, 2)
        for layer in reversed(self._chain()):
            g = layer.backward(g)
        if not need_input_grad:
            return None
        return self._dft.backward(norm.backward(g.reshape(m, bins, 2)))


@register_layer
class PatchTST(RevIN):
    """PatchTST (ATFNet's T block alone): ``(L, C)`` -> ``(T, C)``, RevIN around ``PatchTSTBackbone``."""

    type_name = "patchtst"

    def __init__(
        self,
        pred_len: int,
        d_model: int = 512,
        n_heads: int = 8,
        e_layers: int = 2,
        d_ff: int = 2048,
        dropout: float = 0.1,
        patch_len: int = 16,
        stride: int = 8,
        activation: str = "gelu",
        affine: bool = False,
        seed: int = 0,
        init: str = "xavier",
    ) -> None:
        backbone = PatchTSTBackbone(
            pred_len, d_model, n_heads, e_layers, d_ff, dropout, patch_len, stride, activation, seed, init
        )
        super().__init__([backbone], True, affine)

    def config(self):
        cfg = self.children["0"].config()
        return {**cfg, "type": self.type_name, "affine": self.affine}


@register_layer
class ATFNet(Composite):
    """ATFNet: ``(L, C)`` -> ``(T, C)``, ``w·F-block + (1 − w)·T-block`` with the harmonic weight ``w``.

    ``last_weight`` keeps the ``(B, C)`` weights of the latest forward pass (for reports).
    ``fnet_attn_dropout`` drops the F block's attention weights (``None``: ``complex_dropout``; the official
    code always uses 0.1). ``f_scaling``: ``"exact"`` (default; the F block's inverse DFT is the exact inverse
    of its forward DFT) or ``"official"`` (the official code's scaling by the number of bins F instead of
    N = L+T, to reproduce its numbers). ``init``: ``"xavier"`` (default) or ``"torch"`` (every weight
    starts as in the official PyTorch code, ``nn.init``). ``backward`` treats ``w`` as a constant (it has no
    gradient, as in the official code), so the input gradient is exact only within each block; parameter
    gradients are exact.
    """

    type_name = "atfnet"

    def __init__(
        self,
        pred_len: int,
        d_model: int = 512,
        n_heads: int = 8,
        e_layers: int = 2,
        d_ff: int = 2048,
        dropout: float = 0.1,
        patch_len: int = 16,
        stride: int = 8,
        activation: str = "gelu",
        affine: bool = False,
        fnet_d_model: int = 512,
        fnet_d_ff: int = 2048,
        fnet_layers: int = 2,
        complex_dropout: float = 0.1,
        score: str = "modulus",
        seed: int = 0,
        fnet_attn_dropout: float | None = None,
        f_scaling: str = "exact",
        init: str = "xavier",
    ) -> None:
        super().__init__()
        self.pred_len, self.d_model, self.n_heads, self.e_layers = pred_len, d_model, n_heads, e_layers
        self.d_ff, self.dropout, self.patch_len, self.stride = d_ff, dropout, patch_len, stride
        self.activation, self.affine, self.score, self.seed = activation, affine, score, seed
        self.fnet_d_model, self.fnet_d_ff, self.fnet_layers = fnet_d_model, fnet_d_ff, fnet_layers
        self.complex_dropout, self.fnet_attn_dropout = complex_dropout, fnet_attn_dropout
        self.f_scaling, self.init = f_scaling, check_scheme(self.type_name, init)
        fblock = FrequencyBlock(
            pred_len, fnet_d_model, n_heads, fnet_layers, fnet_d_ff, complex_dropout, score, seed + 1000,
            fnet_attn_dropout, f_scaling, init,
        )  # fmt: skip
        self.children = {
            "t": PatchTST(pred_len, d_model, n_heads, e_layers, d_ff, dropout, patch_len, stride, activation,
                          affine, seed, init),
            "f": ChannelIndependent([fblock]),
        }  # fmt: skip
        self.last_weight = None

    def build(self, input_shape):
        out = self.children["t"].build(tuple(input_shape))
        self.children["f"].build(tuple(input_shape))
        self.input_shape, self.output_shape = tuple(input_shape), tuple(out)
        return self.output_shape

    def forward(self, x, training):
        be = self.backend
        b, length, c = x.shape
        rows = be.permute(x, (0, 2, 1)).reshape(b * c, length)  # (B·C, L)
        self.last_weight = harmonic_weight(be, rows).reshape(b, c)
        y_t = self.children["t"].forward(x, training)
        y_f = self.children["f"].forward(x, training)
        return be.mix_forward(y_f, y_t, self.last_weight)  # (B, T, C)

    def backward(self, gy, need_input_grad=True):
        be = self.backend
        g_f, g_t = be.mix_backward(gy, self.last_weight)
        gx_t = self.children["t"].backward(g_t, need_input_grad)
        gx_f = self.children["f"].backward(g_f, need_input_grad)
        return be.add(gx_t, gx_f) if need_input_grad else None
