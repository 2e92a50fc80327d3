"""The RBM ops (``nn.rbm_ops.RBMOps``) on an OpenCL device, checked against ``rbm_ops_numpy``.

Products go through ``opencl.blas.gemm`` (the conditionals fuse their bias and sigmoid into the GEMM
epilogue); everything else is ``opencl/kernels/rbm.cl``. A batch's update is two GEMMs and four launches
(hidden step, visible step, weight step with its reduction partials, adaptation), with the learning rate
and momentum read and written on the device, so a training step never waits for the host.
"""

from __future__ import annotations

from nn.rbm_ops import HYPER, RECON_KINDS, RBMState
from opencl.blas import gemm, gemm_batched
from opencl.errors import ShapeError
from opencl.program import kernels as build_kernels

_TRY_BYTES = 64 << 20  # bound on the (T, cases, max(V, H)) scratch of one chunk of the initial-weight search


class RBMOpenCLOps:
    """``RBMOps`` for an ``nn.ops_opencl.OpenCLBackend`` (its runtime, pooled arrays and launcher)."""

    def __init__(self, backend) -> None:
        self._be = backend
        self._cpu = backend.launcher.cpu
        self._launch = backend.launcher.enqueue  # Runtime.launch: the library's one enqueue path
        self._wg = 8 if self._cpu else 256  # items of a reducing group (power of two)
        self._np = 8 if self._cpu else 160  # partials of the first reduction stage
        self._cw, self._rl = (8, 1) if self._cpu else (32, 16)  # columns x row lanes of column kernels
        self._ks = None

    @property
    def _k(self):
        if self._ks is None:  # built on first use: programs without an RBM never compile rbm.cl
            self._ks = build_kernels(self._be.runtime, "rbm.cl", WG=self._wg, CW=self._cw, RL=self._rl)
        return self._ks

    def _run(self, name: str, n: int, *args, group: int | None = None) -> None:
        group = group or (64 if self._cpu else 256)
        if n > 0:
            self._launch(self._k[name], (-(-n // group) * group,), (group,), *args)

    def _columns(self, name: str, cols: int, *args) -> None:
        cw, rl = self._cw, self._rl
        self._launch(self._k[name], (-(-cols // cw) * cw, rl), (cw, rl), *args)

    def _reduce(self, name: str, *args) -> None:
        self._launch(self._k[name], (self._np * self._wg,), (self._wg,), *args)

    def _a(self, t):
        return self._be.arg(t)

    # --- conditionals and sampling -------------------------------------------------------------------
    def hidden_probs(self, v, w, c):
        out = self._be.empty((v.shape[0], w.shape[0]))
        gemm(self._be.runtime, v, w, out, trans_b=True, bias=c, activation="sigmoid")
        return out

    def visible_probs(self, h, w, b):
        out = self._be.empty((h.shape[0], w.shape[1]))
        gemm(self._be.runtime, h, w, out, bias=b, activation="sigmoid")
        return out

    def sample(self, p, seed: int, counter: int):
        if p.size >= 2**31:
            raise ShapeError(f"rbm sample: {p.size} elements exceed the kernel's 31-bit index")
        s = self._be.empty(p.shape)
        self._run("rbm_sample", p.size, *self._a(p), *self._a(s), p.size, seed & 0xFFFFFFFF,
                  counter & 0xFFFFFFFF)
        return s

    # --- reductions ----------------------------------------------------------------------------------
    def _sum(self, x, p, mode: int):
        part = self._be.empty((self._np,))
        out = self._be.empty((1,))
        self._reduce("rbm_partials", *self._a(x), *self._a(p), x.size, mode, *self._a(part))
        self._launch(self._k["rbm_finish"], (self._wg,), (self._wg,), *self._a(part), self._np,
                        int(mode == 2), *self._a(out))
        return out

    def recon_error(self, x, p, kind: str):
        if kind not in RECON_KINDS:
            raise ValueError(f"reconstruction error kind must be one of {', '.join(RECON_KINDS)}: {kind!r}")
        if x.shape != p.shape:
            raise ShapeError(f"recon_error: shapes {x.shape} and {p.shape} differ")
        return self._sum(x, p, RECON_KINDS.index(kind))

    def max_abs(self, t):
        return self._sum(t, t, 2)

    # --- initial-weight search -----------------------------------------------------------------------
    def try_errors(self, x, w, b, c):
        be, rt = self._be, self._be.runtime
        n, nv = x.shape
        tries, nh, _ = w.shape
        out = be.zeros((tries,))
        chunk = max(1, min(n, _TRY_BYTES // max(1, tries * max(nv, nh) * x.dtype.itemsize)))
        w_rows = w.reshape(tries * nh, nv)
        part = be.empty((tries, self._np))
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            xc = x[start:start + m]
            pre_h = be.empty((tries * nh, m))  # (T·H, m) = T blocks of (H, m)
            gemm(rt, w_rows, xc, pre_h, trans_b=True)
            self._run("rbm_row_bias_sigmoid", pre_h.size, *self._a(pre_h), *self._a(c), tries * nh, m)
            pre_v = be.empty((tries, m, nv))
            gemm_batched(rt, pre_h.reshape(tries, nh, m), w, pre_v, trans_a=True)
            self._launch(self._k["rbm_try_partials"], (self._np * self._wg, tries), (self._wg, 1),
                      *self._a(pre_v), *self._a(xc), *self._a(b), m, nv, *self._a(part))
            self._run("rbm_try_finish", tries, *self._a(part), self._np, tries, *self._a(out))
        return out

    # --- training step -------------------------------------------------------------------------------
    def update(self, state: RBMState, v1, h_data, q1, v2, q2, x_mean, *, weight_penalty, sparsity_penalty,
               sparsity_target) -> None:
        be, rt = self._be, self._be.runtime
        n, nv = v1.shape
        nh = q1.shape[1]
        if state.hyper.shape != (HYPER,):
            raise ShapeError(f"rbm update: hyper must have shape ({HYPER},), got {state.hyper.shape}")
        sp = be.empty((nh,))
        self._columns("rbm_hidden_update", nh, *self._a(q1), *self._a(h_data), *self._a(q2), n, nh,
                  *self._a(state.on_frac), *self._a(state.c), *self._a(state.c_inc), *self._a(sp),
                  *self._a(state.hyper), sparsity_penalty, sparsity_target)
        gw = be.empty((nh, nv))
        gemm(rt, h_data, v1, gw, trans_a=True, alpha=1.0 / n)
        gemm(rt, q2, v2, gw, trans_a=True, alpha=-1.0 / n, beta=1.0)
        args = (*self._a(gw), *self._a(state.w), *self._a(state.w_inc), *self._a(state.g_prev), *self._a(sp),
                *self._a(x_mean), nh, nv, *self._a(state.hyper), weight_penalty)
        if self._cpu:  # one item per hidden row: a vectorisable loop over the inputs
            np_ = nh
            part = be.empty((3 * np_,))
            self._run("rbm_weight_update_rows", nh, *args, *self._a(part), group=8)
        else:  # items striding over all elements, group reductions
            np_ = self._np
            part = be.empty((3 * np_,))
            self._reduce("rbm_weight_update", *args, *self._a(part))
        self._columns("rbm_visible_update", nv, *self._a(v1), *self._a(v2), n, nv, *self._a(state.b),
                  *self._a(state.b_inc), *self._a(state.hyper))
        self._launch(
            self._k["rbm_adapt"], (self._wg,), (self._wg,), *self._a(part), np_, *self._a(state.hyper)
        )

