"""Float64 reference of the complex-valued and spectral ops (families of ``NumpyBackend``).

Representation: a complex tensor of logical shape ``S`` is a real array of shape ``(*S, 2)`` holding
(Re, Im) pairs — exactly the ``float2`` layout of the OpenCL kernels — so complex parameters live in the
model's flat real buffer and every optimizer treats Re and Im as two independent reals.

Gradient convention: the gradient of the real loss L delivered for a complex z is ``∂L/∂Re z + i·∂L/∂Im z``
(so ``dL = Re(conj(g)·dz)``). For a holomorphic map ``w = f(z)`` this gives ``g_z = conj(f'(z))·g_w``;
non-holomorphic maps (``|z|``, split activations, the modulus softmax, layer norm) are derived on Re and Im
separately. The MQL5 port (seed 003) applies the holomorphic chain rule everywhere, which is wrong for the
latter; every formula here is verified by finite differences in ``tests/test_nn/test_complex*.py``.

The formulas are written from the maths with ``numpy.complex128`` and deliberately share nothing with the
OpenCL kernels they check.
"""

from __future__ import annotations

import numpy as np

COMPLEX_ACTIVATIONS = ("relu", "lrelu", "tanh", "sigmoid")
SCORE_MODES = ("modulus", "holomorphic")
EXP_CLAMP = 20.0  # the holomorphic softmax clamps Re of its exponent to ±20, as the MQL5 port does


def _token_major(qkv: np.ndarray) -> np.ndarray:
    """The attention's ``qkv`` as ``(B, N, 3·H·E, 2)``: a ``(B, 3, N, H·E, 2)`` one (Q, K, V as three blocks
    of N tokens) is regrouped token by token."""
    if qkv.ndim != 5:
        return qkv
    bsz, _, n, he, _ = qkv.shape
    return qkv.transpose(0, 2, 1, 3, 4).reshape(bsz, n, 3 * he, 2)


def _c(a: np.ndarray) -> np.ndarray:
    """``(*S, 2)`` real -> ``(*S,)`` complex128."""
    return a[..., 0] + 1j * a[..., 1]


def _r(z: np.ndarray) -> np.ndarray:
    """``(*S,)`` complex -> ``(*S, 2)`` float64."""
    return np.stack([z.real, z.imag], axis=-1).astype(np.float64)


class ComplexNumpyOps:
    """Complex layer and spectral primitives, NumPy float64: ``ComplexOps`` and ``SpectralOps``.

    Each op's shapes and formula are documented once, on those ``nn.backend`` Protocols."""

    # --- complex dense -----------------------------------------------------------------------------
    def complex_dense_forward(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        y = _c(x) @ _c(w).T
        if b is not None:
            y = y + _c(b)
        return _r(y)

    def complex_dense_backward(
        self,
        x: np.ndarray,
        w: np.ndarray,
        gy: np.ndarray,
        gw_out: np.ndarray,
        gb_out: np.ndarray | None,
        need_input_grad: bool,
    ) -> np.ndarray | None:
        g = _c(gy)
        gw_out[...] = _r(g.T @ np.conj(_c(x)))
        if gb_out is not None:
            gb_out[...] = _r(g.sum(axis=0))
        return _r(g @ np.conj(_c(w))) if need_input_grad else None

    # --- elementwise ---------------------------------------------------------------------------------
    def complex_activation_forward(self, x: np.ndarray, kind: str, alpha: float = 0.01) -> np.ndarray:
        if kind == "relu":
            return np.maximum(x, 0.0)
        if kind == "lrelu":
            return np.where(x > 0, x, alpha * x)
        z = _c(x)
        if kind == "tanh":
            return _r(np.tanh(z))
        if kind == "sigmoid":
            return _r(1.0 / (1.0 + np.exp(-z)))
        raise ValueError(
            f"unknown complex activation {kind!r}: expected one of {', '.join(COMPLEX_ACTIVATIONS)}"
        )

    def complex_activation_backward(
        self, x: np.ndarray, y: np.ndarray, gy: np.ndarray, kind: str, alpha: float = 0.01
    ) -> np.ndarray:
        if kind == "relu":
            return np.where(x > 0, gy, 0.0)
        if kind == "lrelu":
            return np.where(x > 0, gy, alpha * gy)
        yc = _c(y)
        if kind == "tanh":
            d = 1.0 - yc * yc
        elif kind == "sigmoid":
            d = yc * (1.0 - yc)
        else:
            raise ValueError(f"unknown complex activation {kind!r}")
        return _r(np.conj(d) * _c(gy))

    def complex_add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def complex_scale(self, x: np.ndarray, s: np.ndarray) -> np.ndarray:
        return x * s[..., None]

    # --- complex layer normalization ----------------------------------------------------------------
    def complex_layernorm_forward(
        self, x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = _c(x)
        c = z - z.mean(axis=-1, keepdims=True)
        inv_std = 1.0 / np.sqrt((np.abs(c) ** 2).mean(axis=-1) + eps)
        xhat = c * inv_std[:, None]
        return _r(_c(w) * xhat + _c(b)), _r(xhat), inv_std

    def complex_layernorm_backward(
        self,
        gy: np.ndarray,
        xhat: np.ndarray,
        inv_std: np.ndarray,
        w: np.ndarray,
        gw_out: np.ndarray,
        gb_out: np.ndarray,
    ) -> np.ndarray:
        g, h = _c(gy), _c(xhat)
        gb_out[...] = _r(g.sum(axis=0))
        gw_out[...] = _r((g * np.conj(h)).sum(axis=0))
        gh = np.conj(_c(w)) * g
        # r = 1/√v depends on every |c_k|²: d r = −r³/D · Σ Re(conj(c)·dc); S' = Σ Re(conj(gh)·ẑ).
        s = np.real(np.conj(gh) * h).sum(axis=-1, keepdims=True)
        d = h.shape[-1]
        gc = inv_std[:, None] * (gh - h * s / d)
        return _r(gc - gc.mean(axis=-1, keepdims=True))

    # --- complex multi-head attention core ----------------------------------------------------------
    def complex_attention_forward(
        self, qkv: np.ndarray, heads: int, mode: str, causal: bool, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        qkv = _token_major(qkv)
        bsz, n, width, _ = qkv.shape
        e_dim = width // (3 * heads)
        z = _c(qkv).reshape(bsz, n, 3, heads, e_dim)  # (B, N, 3, H, E)
        q, k, v = (z[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # each (B, H, N, E)
        s = q @ k.transpose(0, 1, 3, 2)  # (B, H, N, N)
        allowed = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
        if mode == "modulus":
            a = np.where(allowed, np.abs(s), -np.inf)
            ex = np.exp(a - a.max(axis=-1, keepdims=True))
            p = ex / ex.sum(axis=-1, keepdims=True) + 0j
        elif mode == "holomorphic":
            t = s / np.sqrt(e_dim)
            ex = np.where(allowed, np.exp(np.clip(t.real, -EXP_CLAMP, EXP_CLAMP) + 1j * t.imag), 0.0)
            p = ex / ex.sum(axis=-1, keepdims=True)
        else:
            raise ValueError(f"unknown score mode {mode!r}: expected one of {', '.join(SCORE_MODES)}")
        pm = p if mask is None else p * mask.transpose(0, 1, 3, 2)
        out = (pm @ v).transpose(0, 2, 1, 3).reshape(bsz, n, heads * e_dim)  # (B, N, H·E)
        return _r(out), _r(s.transpose(0, 1, 3, 2)), _r(p.transpose(0, 1, 3, 2))  # key-major [b, h, j, i]

    def complex_attention_backward(
        self,
        qkv: np.ndarray,
        s: np.ndarray,
        p: np.ndarray,
        gout: np.ndarray,
        heads: int,
        mode: str,
        causal: bool,
        mask: np.ndarray | None = None,
    ) -> np.ndarray:
        blocks = qkv.shape if qkv.ndim == 5 else None
        qkv = _token_major(qkv)
        bsz, n, width, _ = qkv.shape
        e_dim = width // (3 * heads)
        z = _c(qkv).reshape(bsz, n, 3, heads, e_dim)
        q, k, v = (z[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        sc, pc = _c(s).transpose(0, 1, 3, 2), _c(p).transpose(0, 1, 3, 2)  # back to [b, h, i, j]
        go = _c(gout).reshape(bsz, n, heads, e_dim).transpose(0, 2, 1, 3)  # (B, H, N, E)
        m = 1.0 if mask is None else mask.transpose(0, 1, 3, 2)  # [b, h, i, j]
        gv = np.conj(pc * m).transpose(0, 1, 3, 2) @ go
        gp = (go @ np.conj(v).transpose(0, 1, 3, 2)) * m  # delivered gradient of p_ij (complex)
        allowed = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
        if mode == "modulus":
            pr, gpr = pc.real, gp.real  # p is real: only Re(gp) reaches it
            ga = pr * (gpr - (pr * gpr).sum(axis=-1, keepdims=True))
            mag = np.abs(sc)
            gs = np.where(allowed & (mag > 0), ga * sc / np.where(mag > 0, mag, 1.0), 0.0)
        else:
            t = sc / np.sqrt(e_dim)
            ex = np.where(allowed, np.exp(np.clip(t.real, -EXP_CLAMP, EXP_CLAMP) + 1j * t.imag), 0.0)
            zsum = ex.sum(axis=-1, keepdims=True)
            # p = e/Z is holomorphic in every e: g_e = conj(1/Z)·(gp − Σ_j conj(p_j)·gp_j)
            ge = np.conj(1.0 / zsum) * (gp - (np.conj(pc) * gp).sum(axis=-1, keepdims=True))
            wv = np.conj(ge) * ex
            # e = exp(c(Re t) + i·Im t): g_t = c'(Re t)·Re(w) − i·Im(w) with w = conj(g_e)·e
            slope = (np.abs(t.real) < EXP_CLAMP).astype(np.float64)
            gs = np.where(allowed, slope * wv.real - 1j * wv.imag, 0.0) / np.sqrt(e_dim)
        gq = gs @ np.conj(k)
        gk = gs.transpose(0, 1, 3, 2) @ np.conj(q)
        g = np.stack([gq, gk, gv], axis=2)  # (B, H, 3, N, E)
        if blocks is not None:  # the caller's layout: (B, 3, N, H·E)
            return _r(g.transpose(0, 2, 3, 1, 4).reshape(blocks[:-1]))
        return _r(g.transpose(0, 3, 2, 1, 4).reshape(bsz, n, 3 * heads * e_dim))

    # --- spectral ------------------------------------------------------------------------------------
    def spectral_forward(self, x: np.ndarray, basis: np.ndarray) -> np.ndarray:
        return x @ basis

    def spectral_backward(self, gy: np.ndarray, basis: np.ndarray) -> np.ndarray:
        return gy @ basis.T

    def spectrum_norm_forward(
        self, x: np.ndarray, eps: float, ddof: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = _c(x)
        mean = z.mean(axis=-1)
        std = np.sqrt(np.abs(z).var(axis=-1, ddof=ddof) + eps)
        return _r((z - mean[:, None]) / std[:, None]), _r(mean), std

    def spectrum_norm_backward(
        self,
        x: np.ndarray,
        y: np.ndarray,
        std: np.ndarray,
        gy: np.ndarray,
        ddof: int,
        g_mean: np.ndarray | None = None,
        g_std: np.ndarray | None = None,
    ) -> np.ndarray:
        z, g = _c(x), _c(gy)
        f = z.shape[-1]
        a = np.abs(z)
        unit = np.where(a > 0, z / np.where(a > 0, a, 1.0), 0.0)
        r = np.real(np.conj(g) * _c(y)).sum(axis=-1, keepdims=True)
        sd = std[:, None]
        gs = -r / sd if g_std is None else g_std[:, None] - r / sd  # total gradient reaching σ
        gx = (g - g.mean(axis=-1, keepdims=True)) / sd
        if g_mean is not None:
            gx += _c(g_mean)[:, None] / f
        gx += gs * (a - a.mean(axis=-1, keepdims=True)) * unit / (sd * (f - ddof))
        return _r(gx)

    def spectrum_denorm_forward(self, y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        return _r(_c(y) * std[:, None] + _c(mean)[:, None])

    def spectrum_denorm_backward(
        self, gy: np.ndarray, y: np.ndarray, std: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g = _c(gy)
        return gy * std[:, None, None], _r(g.sum(axis=-1)), np.real(np.conj(g) * _c(y)).sum(axis=-1)

    def harmonic_weight(self, x: np.ndarray) -> np.ndarray:
        amp = np.abs(np.fft.rfft(x - x.mean(axis=-1, keepdims=True), axis=-1))
        f = amp.shape[-1]
        window = amp.copy()
        window[:, :3] = 0.0
        window[:, f // 3 :] = 0.0
        k0 = window.argmax(axis=-1)
        rows = np.arange(amp.shape[0])
        energy = sum(amp[rows, h * k0] ** 2 for h in (1, 2, 3))
        return energy / ((amp**2).sum(axis=-1) + 1e-5)
