"""The deep-belief-net ops (``nn.rbm_ops.RBMOps``) on an OpenCL device, checked against ``rbm_ops_numpy``.

``RBMOpenCLOps`` is the ``RBMOps`` family of ``OpenCLBackend``, built on its shared
``opencl.launch.Launcher``; its kernels (``opencl/kernels/rbm.cl``) and their work-groups are declared in
``KERNELS``, like every other family's. Products go through ``opencl.blas.gemm`` (the conditionals fuse
their bias and sigmoid into the GEMM epilogue). A batch's update is two GEMMs and four launches (hidden
step, visible step, weight step with its reduction partials, adaptation), with the learning rate and
momentum read and written on the device, so a training step never waits for the host.
"""

from __future__ import annotations

from nn.rbm_ops import HYPER, RECON_KINDS, RBMState
from opencl.blas import gemm, gemm_batched
from opencl.errors import ShapeError
from opencl.launch import KernelSpec, Launcher, kernel_specs

_TRY_BYTES = 64 << 20  # bound on the (T, cases, max(V, H)) scratch of one chunk of the initial-weight search
# Reductions (rbm.cl's WG): items of a reducing group, and the groups of a first stage (NP partials).
_WG = {"cpu": 8, "gpu": 256}
_NP = {"cpu": 8, "gpu": 160}
_COLUMNS = {"cpu": (8, 1), "gpu": (32, 16)}  # columns x row lanes of the column kernels (CG x RG)
_GROUP = {"cpu": 64, "gpu": 256}  # 1-D elementwise kernels
_MODE = {"mse": 0, "ce": 1, "max": 2, "dot": 3, "masked_sq": 4}  # rbm_partials' quantities

_REDUCE = ((_WG["cpu"],), (_WG["gpu"],))
KERNELS: tuple[KernelSpec, ...] = (
    *kernel_specs(
        "rbm.cl",
        "rbm_sample rbm_row_bias_sigmoid rbm_try_finish dbn_axpby dbn_penalty_grad",
        (_GROUP["cpu"],),
        (_GROUP["gpu"],),
    ),
    *kernel_specs("rbm.cl", "rbm_hidden_update rbm_visible_update", _COLUMNS["cpu"], _COLUMNS["gpu"]),
    # one work-group per partial (the first stage) or a single group (the second)
    *kernel_specs(
        "rbm.cl",
        "rbm_partials rbm_finish rbm_weight_update rbm_adapt rbm_try_partials",
        *_REDUCE,
        per_group=True,
    ),
    KernelSpec("rbm.cl", "rbm_weight_update_rows", (8,), (64,)),  # CPU layout: one item per hidden row
)


class RBMOpenCLOps:
    """``RBMOps`` on the OpenCL backend's shared ``Launcher`` (its runtime and pooled arrays)."""

    def __init__(self, launcher: Launcher) -> None:
        self._launcher = launcher
        self.runtime = launcher.runtime
        self.arg = launcher.arg
        layout = launcher.layout
        self._cpu = launcher.cpu
        self._np = _NP[layout]
        cg, rg = _COLUMNS[layout]
        self._k = launcher.bind(KERNELS, WG=_WG[layout], CG=cg, RG=rg)  # rbm.cl is built on first launch

    def empty(self, shape):
        """A pooled array (looked up on the launcher at each call, so tests can poison fresh outputs)."""
        return self._launcher.empty(shape)

    # --- conditionals and sampling -------------------------------------------------------------------
    def rbm_hidden_probs(self, v, w, c):
        out = self.empty((v.shape[0], w.shape[0]))
        gemm(self.runtime, v, w, out, trans_b=True, bias=c, activation="sigmoid")
        return out

    def rbm_visible_probs(self, h, w, b):
        out = self.empty((h.shape[0], w.shape[1]))
        gemm(self.runtime, h, w, out, bias=b, activation="sigmoid")
        return out

    def rbm_sample(self, p, seed: int, counter: int):
        if p.size >= 2**31:
            raise ShapeError(f"rbm sample: {p.size} elements exceed the kernel's 31-bit index")
        s = self.empty(p.shape)
        self._k["rbm_sample"](
            (p.size,), *self.arg(p), *self.arg(s), p.size, seed & 0xFFFFFFFF, counter & 0xFFFFFFFF
        )
        return s

    # --- reductions ----------------------------------------------------------------------------------
    def _sum(self, x, p, quantity: str):
        """``(1,)`` sum (max for ``"max"``) over the elements of one of ``rbm_partials``' quantities."""
        part = self.empty((self._np,))
        out = self.empty((1,))
        mode = _MODE[quantity]
        self._k["rbm_partials"]((self._np,), *self.arg(x), *self.arg(p), x.size, mode, *self.arg(part))
        self._k["rbm_finish"]((1,), *self.arg(part), self._np, int(quantity == "max"), *self.arg(out))
        return out

    def rbm_recon_error(self, x, p, kind: str):
        if kind not in RECON_KINDS:
            raise ValueError(f"reconstruction error kind must be one of {', '.join(RECON_KINDS)}: {kind!r}")
        if x.shape != p.shape:
            raise ShapeError(f"recon_error: shapes {x.shape} and {p.shape} differ")
        return self._sum(x, p, kind)

    def rbm_max_abs(self, t):
        return self._sum(t, t, "max")

    # --- initial-weight search -----------------------------------------------------------------------
    def rbm_try_errors(self, x, w, b, c):
        rt = self.runtime
        n, nv = x.shape
        tries, nh, _ = w.shape
        out = self.empty((tries,))
        chunk = max(1, min(n, _TRY_BYTES // max(1, tries * max(nv, nh) * x.dtype.itemsize)))
        w_rows = w.reshape(tries * nh, nv)
        part = self.empty((tries, self._np))
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            xc = x[start : start + m]
            pre_h = self.empty((tries * nh, m))  # (T·H, m) = T blocks of (H, m)
            gemm(rt, w_rows, xc, pre_h, trans_b=True)
            self._k["rbm_row_bias_sigmoid"]((pre_h.size,), *self.arg(pre_h), *self.arg(c), tries * nh, m)
            pre_v = self.empty((tries, m, nv))
            gemm_batched(rt, pre_h.reshape(tries, nh, m), w, pre_v, trans_a=True)
            self._k["rbm_try_partials"](
                (self._np, tries), *self.arg(pre_v), *self.arg(xc), *self.arg(b), m, nv, *self.arg(part)
            )
            self._k["rbm_try_finish"](
                (tries,), *self.arg(part), self._np, tries, int(start > 0), *self.arg(out)
            )
        return out

    # --- training step -------------------------------------------------------------------------------
    def rbm_update(
        self,
        state: RBMState,
        v1,
        h_data,
        q1,
        v2,
        q2,
        x_mean,
        *,
        weight_penalty,
        sparsity_penalty,
        sparsity_target,
    ) -> None:
        rt, a = self.runtime, self.arg
        n, nv = v1.shape
        nh = q1.shape[1]
        if state.hyper.shape != (HYPER,):
            raise ShapeError(f"rbm update: hyper must have shape ({HYPER},), got {state.hyper.shape}")
        sp = self.empty((nh,))
        self._k["rbm_hidden_update"](
            (nh, self._k["rbm_hidden_update"].local[1]),
            *a(q1),
            *a(h_data),
            *a(q2),
            n,
            nh,
            *a(state.on_frac),
            *a(state.c),
            *a(state.c_inc),
            *a(sp),
            *a(state.hyper),
            sparsity_penalty,
            sparsity_target,
        )
        gw = self.empty((nh, nv))
        gemm(rt, h_data, v1, gw, trans_a=True, alpha=1.0 / n)
        gemm(rt, q2, v2, gw, trans_a=True, alpha=-1.0 / n, beta=1.0)
        args = (
            *a(gw),
            *a(state.w),
            *a(state.w_inc),
            *a(state.g_prev),
            *a(sp),
            *a(x_mean),
            nh,
            nv,
            *a(state.hyper),
            weight_penalty,
        )
        if self._cpu:  # one item per hidden row: a vectorisable loop over the inputs
            n_part = nh
            part = self.empty((3 * n_part,))
            self._k["rbm_weight_update_rows"]((nh,), *args, *a(part))
        else:  # groups striding over all elements, group reductions
            n_part = self._np
            part = self.empty((3 * n_part,))
            self._k["rbm_weight_update"]((n_part,), *args, *a(part))
        self._k["rbm_visible_update"](
            (nv, self._k["rbm_visible_update"].local[1]),
            *a(v1),
            *a(v2),
            n,
            nv,
            *a(state.b),
            *a(state.b_inc),
            *a(state.hyper),
        )
        self._k["rbm_adapt"]((1,), *a(part), n_part, *a(state.hyper))

    # --- the supervised head's vector ops ------------------------------------------------------------
    def dbn_dot(self, a, b):
        if a.shape != b.shape:
            raise ShapeError(f"dbn_dot: shapes {a.shape} and {b.shape} differ")
        return self._sum(a, b, "dot")

    def dbn_axpby(self, alpha: float, x, beta: float, y):
        if x.shape != y.shape:
            raise ShapeError(f"dbn_axpby: shapes {x.shape} and {y.shape} differ")
        out = self.empty(x.shape)
        self._k["dbn_axpby"](
            (x.size,), float(alpha), *self.arg(x), float(beta), *self.arg(y), *self.arg(out), x.size
        )
        return out

    def dbn_weight_penalty(self, theta, mask, coef: float, grad):
        if theta.shape != mask.shape or (grad is not None and grad.shape != theta.shape):
            raise ShapeError(
                f"dbn_weight_penalty: theta {theta.shape}, mask {mask.shape} and grad "
                f"{None if grad is None else grad.shape} differ"
            )
        if grad is not None:
            self._k["dbn_penalty_grad"](
                (theta.size,), *self.arg(theta), *self.arg(mask), float(coef), *self.arg(grad), theta.size
            )
        total = self._sum(theta, mask, "masked_sq")
        self._k["dbn_axpby"]((1,), float(coef), *self.arg(total), 0.0, *self.arg(total), *self.arg(total), 1)
        return total
