"""The OpenCL backend: every ``nn.backend.Backend`` op as kernel launches on device-resident tensors.

Tensors are ``pyopencl.array.Array`` allocated from the runtime's memory pool; an op enqueues its kernel
and returns without waiting, so a training step is a stream of launches with no host round trip (only
``to_numpy`` reads back). Kernels live in ``opencl/kernels/*.cl`` and are launched through one
``opencl.launch.Launcher``; each family declares its kernels and their work-groups in a ``KernelSpec``
table next to its code (``CORE_KERNELS`` here). Dense layers use ``opencl.blas.gemm`` with its fused bias +
activation epilogue, except batches of at most ``SMALL_B`` rows (online training), which take
matrix-vector kernels: one launch forward, one backward on GPUs (two on CPUs), no packing of the weight
matrix.

Work-group layouts. CPU (PoCL): local-memory barriers are slow and PoCL cannot vectorise across items
whose body is a loop, so reductions and column/row kernels give each item 8 adjacent columns (or one row)
as explicit 8-wide vectors and loop over the other axis; single-group reductions use one item. GPU:
reductions use 256-item groups with local-memory trees, column kernels (32 columns x 8 row lanes) groups.
Both layouts are tested on any device (``layout=``).

The other op families (attention, complex, spectral, RBM) are objects built on the same launcher
(``FAMILY_OPS``); ``nn.backend.bind_families`` exposes their ops on the backend.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from nn.attention_ops_opencl import AttentionOpenCLOps
from nn.backend import ACT_CODE, Activation, AttentionOps, ComplexOps, RBMOps, SpectralOps, bind_families
from nn.complex_ops_opencl import ComplexOpenCLOps
from nn.dense_stack import DenseStack
from nn.online_opencl import OnlineEpoch
from nn.rbm_ops_opencl import RBMOpenCLOps
from opencl import get_runtime, memory
from opencl import kernels as build_kernels
from opencl.blas import Product, gemm, gemm_pair
from opencl.errors import ShapeError
from opencl.launch import KernelSpec, Launcher, kernel_specs

_POINTWISE_LOSS = {"mse": 0, "mae": 1, "bce": 2}
SMALL_B = 4  # batches up to this size take the matrix-vector kernels of dense_small.cl
# GPU layout of the small-batch kernels: forward groups of _FWD_ROWS neurons x _FWD_LANES lanes; backward
# groups of _BW_GROUP items, input-gradient groups of _BX_COLS columns (passed to dense_small.cl as -D).
_FWD_LANES, _FWD_ROWS, _BW_GROUP, _BX_COLS = 32, 2, 256, 8
_PARTIALS = 64  # work-groups of the global-norm reduction (partial sums read by every item afterwards)
_LWG = {"cpu": 1, "gpu": 256}  # single-group reduction width (LWG in the kernels)
_RG, _CG = {"cpu": 1, "gpu": 8}, {"cpu": 16, "gpu": 32}  # column kernels: CG columns x RG row lanes
_VEC = {"cpu": 8, "gpu": 1}  # elements per item of the optimizer and activation kernels


_EW = ((1024,), (256,))  # elementwise: one item per element
_VECG = ((128,), (256,))  # VEC elements per item
_NEURON = ((16,), (64,))  # small-batch dense kernels
_COL = ((_CG["cpu"], _RG["cpu"]), (_CG["gpu"], _RG["gpu"]))
_REDUCE = ((_LWG["cpu"],), (_LWG["gpu"],))
CORE_KERNELS: tuple[KernelSpec, ...] = (
    *kernel_specs("elementwise.cl", "fill add_inplace mul gather_rows", *_EW),
    *kernel_specs("elementwise.cl", "gather_rows8", (8,), (8,)),
    *kernel_specs("activations.cl", "activation_forward activation_backward", *_VECG),
    *kernel_specs("activations.cl", "softmax_forward softmax_backward", (64,), (128,)),
    *kernel_specs("softmax_loss.cl", "softmax_cce_loss pointwise_loss", *_REDUCE, per_group=True),
    *kernel_specs("batchnorm.cl", "batchnorm_forward_infer", *_EW),
    *kernel_specs("batchnorm.cl", "batchnorm_forward_train8 batchnorm_backward8", (4,), (4,)),
    *kernel_specs("batchnorm.cl", "batchnorm_forward_train batchnorm_backward", *_COL),
    *kernel_specs("dropout.cl", "dropout_mask dropout_apply", *_EW),
    *kernel_specs(
        "optim.cl",
        "sgd_update momentum_update adagrad_update rmsprop_update adadelta_update adam_update",
        *_VECG,
    ),
    *kernel_specs("reduce.cl", "sumsq_partials clip_by_norm", *_REDUCE, per_group=True),
    *kernel_specs(
        "dense_small.cl", "dense_small_forward dense_small_backward_w dense_small_backward_x", *_NEURON
    ),
    *kernel_specs("dense_small.cl", "dense_small_forward_gpu", (1, 1), (_FWD_LANES, _FWD_ROWS)),
    *kernel_specs("dense_small.cl", "dense_small_backward_gpu", (1,), (_BW_GROUP,), per_group=True),
    *kernel_specs("elementwise.cl", "dense_dz_bias8", (4,), (4,)),
    *kernel_specs("elementwise.cl", "dense_dz_bias", *_COL),
)


class OpenCLBackend:
    """``Backend`` on an OpenCL device (float32 by default, float64 where the device has fp64).

    The core ops are this class's methods; the attention, complex, spectral and RBM families are objects of
    ``FAMILY_OPS`` sharing its ``Launcher``, as on the NumPy backend."""

    FAMILY_OPS: ClassVar[dict[type, type]] = {
        AttentionOps: AttentionOpenCLOps,
        ComplexOps: ComplexOpenCLOps,
        SpectralOps: ComplexOpenCLOps,
        RBMOps: RBMOpenCLOps,
    }

    def __init__(
        self,
        device=None,
        dtype=None,
        profile: bool = False,
        *,
        layout: str | None = None,
        fused_online: bool = True,
    ) -> None:
        """``device``/``dtype`` as ``opencl.get_runtime`` takes them; ``profile`` records per-kernel device
        time (passed explicitly: no environment variable switches it on). ``layout`` ("cpu" or "gpu")
        overrides the work-group layout chosen from the device kind, so the GPU kernels can be tested on a
        CPU. ``fused_online=False`` trains batch 1 step by step even where the fused epoch applies."""
        rt = get_runtime(device, dtype, profile)
        self.fused_online = fused_online
        self.runtime = rt
        self.launcher = launcher = Launcher(rt, layout)
        self.name = f"opencl:{rt.info.name}"
        self.dtype = rt.dtype
        self.alignment = rt.alignment
        self._queue = rt.queue
        lay = launcher.layout
        cpu = self._cpu = launcher.cpu
        self._lwg, self._rg = _LWG[lay], _RG[lay]
        self._vec = _VEC[lay]
        defines = {"LWG": self._lwg, "RG": self._rg, "CG": _CG[lay], "SMALL_B": SMALL_B, "VEC": self._vec}
        if not cpu:
            defines |= {
                "NN_GPU": 1,
                "FWD_LANES": _FWD_LANES,
                "FWD_ROWS": _FWD_ROWS,
                "BW_GROUP": _BW_GROUP,
                "BX_COLS": _BX_COLS,
            }
        self.build_defines = defines
        self._k = launcher.bind_core(CORE_KERNELS, **defines)
        for file in dict.fromkeys(spec.file for spec in CORE_KERNELS):  # built now: every model runs them
            build_kernels(rt, file, **defines)
        self.empty = launcher.empty
        self.arg = launcher.arg
        self._partials = self.empty((_PARTIALS,))
        objects = {cls: cls(launcher) for cls in set(self.FAMILY_OPS.values())}
        bind_families(self, {family: objects[cls] for family, cls in self.FAMILY_OPS.items()})

    # --- memory -------------------------------------------------------------------------------------
    def asarray(self, a: np.ndarray) -> cla.Array:
        return memory.to_device(self.runtime, np.asarray(a))

    def to_numpy(self, t: cla.Array) -> np.ndarray:
        return t.get()

    def zeros(self, shape: tuple[int, ...]) -> cla.Array:
        t = self.empty(shape)
        self.fill_(t, 0.0)
        return t

    def view(self, flat: cla.Array, offset: int, shape: tuple[int, ...]) -> cla.Array:
        if not self.launcher.fast_arrays:
            return memory.view(flat, offset, tuple(shape), self.alignment)
        # Same checks as opencl.memory.view, without pyopencl's slicing.
        meta = self.launcher.describe(shape, flat.dtype)
        size = meta[3]
        if flat.ndim != 1:
            raise ShapeError(f"view() needs a 1-D flat tensor, got shape {flat.shape}")
        if offset % self.alignment:
            raise ShapeError(f"view offset {offset} is not a multiple of the alignment {self.alignment}")
        if offset < 0 or offset + size > flat.size:
            raise ShapeError(f"view [{offset}, {offset + size}) exceeds the flat tensor of {flat.size}")
        return self.launcher.view_of(flat, offset, meta)

    def fill_(self, t: cla.Array, value: float) -> None:
        if t.size:
            self._k["fill"]((t.size,), *self.arg(t), value, t.size)

    def copy_(self, dst: cla.Array, src: cla.Array) -> None:
        _same_shape("copy_", dst, src)
        if dst.size:
            cl.enqueue_copy(
                self._queue,
                dst.base_data,
                src.base_data,
                byte_count=dst.nbytes,
                src_offset=src.offset,
                dst_offset=dst.offset,
            )

    def add_(self, dst: cla.Array, src: cla.Array) -> None:
        _same_shape("add_", dst, src)
        if dst.size:
            self._k["add_inplace"]((dst.size,), *self.arg(dst), *self.arg(src), dst.size)

    def gather_rows(self, src: cla.Array, rows: cla.Array) -> cla.Array:
        if rows.dtype != np.int32 or rows.ndim != 1:
            raise ShapeError(f"gather_rows: rows must be a 1-D int32 tensor, got {rows.dtype} {rows.shape}")
        out = self.empty((rows.shape[0], *src.shape[1:]))
        f = math.prod(src.shape[1:])
        if not out.size:
            return out
        if self._cpu:  # one item per row, 8-wide copies
            self._k["gather_rows8"](
                (rows.shape[0],), *self.arg(src), *self.arg(rows), *self.arg(out), f, rows.shape[0]
            )
        else:  # one item per element: coalesced
            self._k["gather_rows"]((out.size,), *self.arg(src), *self.arg(rows), *self.arg(out), f, out.size)
        return out

    def synchronize(self) -> None:
        self.runtime.synchronize()

    def online_epoch(self, stack: DenseStack) -> OnlineEpoch | None:
        """The fused batch-1 epoch (``nn.online_opencl``) where it applies and ``fused_online`` is on."""
        return OnlineEpoch.build(self, stack) if self.fused_online else None

    def device_seconds(self) -> float | None:
        """Cumulative kernel time on the device when profiling is on (else ``None``); waits for the queue."""
        return self.runtime.profiler.device_seconds()

    def build_seconds(self) -> float:
        """Cumulative wall time spent compiling kernel programs (a first epoch pays it)."""
        return self.runtime.build_seconds

    # --- dense --------------------------------------------------------------------------------------
    def dense_forward(self, x: cla.Array, w: cla.Array, b: cla.Array, act: Activation) -> cla.Array:
        if not act.output_derivable:
            raise ValueError(f"activation {act.kind!r} cannot be fused into a dense layer")
        batch, inputs = x.shape
        outputs = w.shape[0]
        y = self.empty((batch, outputs))  # (B, O)
        if batch <= SMALL_B:  # the online-training hot path: (buffer, offset) pairs spelled out inline
            n = y.dtype.itemsize
            args = (
                x.base_data,
                x.offset // n,
                w.base_data,
                w.offset // n,
                b.base_data,
                b.offset // n,
                y.base_data,
                y.offset // n,
                inputs,
                outputs,
                batch,
                ACT_CODE[act.kind],
                act.alpha,
                act.beta,
            )
            if self._cpu:  # 4 neurons per item, 8-wide vectors
                self._k["dense_small_forward"]((-(-outputs // 4),), *args)
            else:  # FWD_ROWS neurons per group, FWD_LANES lanes over the inputs of each
                self._k["dense_small_forward_gpu"]((1, outputs), *args)
        else:
            gemm(self.runtime, x, w, y, trans_b=True, bias=b, activation=act)
        return y

    def dense_backward(self, x, w, y, gy, act, gw_out, gb_out, need_input_grad):
        _same_shape("dense_backward", y, gy)
        batch, outputs = y.shape
        inputs = x.shape[1]
        if batch <= SMALL_B and not self._cpu and outputs * inputs < 2**31:  # one launch (int indices)
            gx = self.empty(x.shape) if need_input_grad else None
            wg = -(-outputs * inputs // _BW_GROUP)
            xg = -(-inputs // _BX_COLS) if need_input_grad else 0
            g = gy if gx is None else gx  # gx groups absent: any buffer fills the slot
            n = y.dtype.itemsize
            self._k["dense_small_backward_gpu"](
                (wg + xg,),
                gy.base_data,
                gy.offset // n,
                y.base_data,
                y.offset // n,
                x.base_data,
                x.offset // n,
                w.base_data,
                w.offset // n,
                gw_out.base_data,
                gw_out.offset // n,
                gb_out.base_data,
                gb_out.offset // n,
                g.base_data,
                g.offset // n,
                inputs,
                outputs,
                batch,
                ACT_CODE[act.kind],
                act.alpha,
                wg,
            )
            return gx
        dz = self.empty((batch, outputs))
        if batch <= SMALL_B:
            self._k["dense_small_backward_w"](
                (outputs,),
                *self.arg(gy),
                *self.arg(y),
                *self.arg(x),
                *self.arg(dz),
                *self.arg(gw_out),
                *self.arg(gb_out),
                inputs,
                outputs,
                batch,
                ACT_CODE[act.kind],
                act.alpha,
            )
            if not need_input_grad:
                return None
            gx = self.empty(x.shape)
            self._k["dense_small_backward_x"](
                (-(-inputs // 8),), *self.arg(dz), *self.arg(w), *self.arg(gx), inputs, outputs, batch
            )
            return gx
        dz_args = (
            *self.arg(gy),
            *self.arg(y),
            *self.arg(dz),
            *self.arg(gb_out),
            outputs,
            batch,
            ACT_CODE[act.kind],
            act.alpha,
        )
        if self._cpu:  # one item per 8 columns, explicit vectors
            self._k["dense_dz_bias8"]((-(-outputs // 8),), *dz_args)
        else:
            self._k["dense_dz_bias"]((outputs, 1), *dz_args)
        if not need_input_grad:
            gemm(self.runtime, dz, x, gw_out, trans_a=True)  # (B, O)ᵀ·(B, I) -> (O, I)
            return None
        gx = self.empty(x.shape)
        if self._cpu:  # a CPU device runs a pair one product after the other: nothing to save
            gemm(self.runtime, dz, x, gw_out, trans_a=True)
            gemm(self.runtime, dz, w, gx)  # (B, O)·(O, I) -> (B, I)
        else:  # one launch for both: the driver's cost per launch is what a small product costs
            gemm_pair(self.runtime, Product(dz, x, gw_out, trans_a=True), Product(dz, w, gx))
        return gx

    # --- elementwise activations and softmax --------------------------------------------------------
    def activation_forward(self, x: cla.Array, act: Activation) -> cla.Array:
        y = self.empty(x.shape)
        if x.size:
            self._k["activation_forward"](
                (-(-x.size // self._vec),),
                *self.arg(x),
                *self.arg(y),
                x.size,
                ACT_CODE[act.kind],
                act.alpha,
                act.beta,
            )
        return y

    def activation_backward(self, x, y, gy, act: Activation) -> cla.Array:
        # Output-derivable kinds read y, the others x: the unused one may be None.
        x = y if x is None else x
        y = x if y is None else y
        gx = self.empty(gy.shape)
        if gy.size:
            self._k["activation_backward"](
                (-(-gy.size // self._vec),),
                *self.arg(x),
                *self.arg(y),
                *self.arg(gy),
                *self.arg(gx),
                gy.size,
                ACT_CODE[act.kind],
                act.alpha,
            )
        return gx

    def _rows(self, kernel: str, c: int, b: int, *args) -> None:
        self._k[kernel]((b,), *args, c, b)

    def softmax_forward(self, x: cla.Array) -> cla.Array:
        y = self.empty(x.shape)
        c = x.shape[-1]
        if x.size:
            self._rows("softmax_forward", c, x.size // c, *self.arg(x), *self.arg(y))
        return y

    def softmax_backward(self, y: cla.Array, gy: cla.Array) -> cla.Array:
        _same_shape("softmax_backward", y, gy)
        gx = self.empty(y.shape)
        c = y.shape[-1]
        if y.size:
            self._rows("softmax_backward", c, y.size // c, *self.arg(y), *self.arg(gy), *self.arg(gx))
        return gx

    # --- dropout ------------------------------------------------------------------------------------
    def dropout_mask(self, shape: tuple[int, ...], rate: float, seed: int, counter: int) -> cla.Array:
        args = _dropout_args(math.prod(shape), rate, seed, counter)  # checked before allocating
        mask = self.empty(shape)
        if mask.size:
            self._k["dropout_mask"]((mask.size,), *self.arg(mask), *args)
        return mask

    def dropout_apply(
        self, x: cla.Array, rate: float, seed: int, counter: int, pairs: bool = False
    ) -> tuple[cla.Array, cla.Array]:
        if pairs and (x.ndim == 0 or x.shape[-1] != 2):
            raise ShapeError(f"dropout_apply: pairs=True needs a complex (..., 2) tensor, got {x.shape}")
        mshape = x.shape[:-1] if pairs else x.shape
        args = _dropout_args(math.prod(mshape), rate, seed, counter)  # checked before allocating
        mask, y = self.empty(mshape), self.empty(x.shape)
        if mask.size:
            n = mask.size
            self._k["dropout_apply"](
                (n,), *self.arg(x), *self.arg(y), *self.arg(mask), n, 2 if pairs else 1, *args[1:]
            )
        return y, mask

    def mul(self, a: cla.Array, b: cla.Array) -> cla.Array:
        _same_shape("mul", a, b)
        out = self.empty(a.shape)
        if a.size:
            self._k["mul"]((a.size,), *self.arg(a), *self.arg(b), *self.arg(out), a.size)
        return out

    # --- batch normalization ------------------------------------------------------------------------
    def batchnorm_forward(self, x, gamma, beta, running_mean, running_var, training, momentum, eps):
        batch, features = x.shape
        y = self.empty(x.shape)
        xhat = self.empty(x.shape)
        inv_std = self.empty((features,))
        args = (
            *self.arg(x),
            *self.arg(gamma),
            *self.arg(beta),
            *self.arg(running_mean),
            *self.arg(running_var),
            *self.arg(y),
            *self.arg(xhat),
            *self.arg(inv_std),
            features,
        )
        if training and batch > 1:
            if self._cpu:
                self._k["batchnorm_forward_train8"]((-(-features // 8),), *args, batch, momentum, eps)
            else:
                self._k["batchnorm_forward_train"]((features, 1), *args, batch, momentum, eps)
        elif x.size:
            self._k["batchnorm_forward_infer"]((x.size,), *args, x.size, eps)
        return y, xhat, inv_std

    def batchnorm_backward(self, gy, xhat, inv_std, gamma, ggamma_out, gbeta_out) -> cla.Array:
        _same_shape("batchnorm_backward", gy, xhat)
        batch, features = gy.shape
        gx = self.empty(gy.shape)
        args = (
            *self.arg(gy),
            *self.arg(xhat),
            *self.arg(inv_std),
            *self.arg(gamma),
            *self.arg(gx),
            *self.arg(ggamma_out),
            *self.arg(gbeta_out),
            features,
            batch,
        )
        if self._cpu:
            self._k["batchnorm_backward8"]((-(-features // 8),), *args)
        else:
            self._k["batchnorm_backward"]((features, 1), *args)
        return gx

    # --- losses -------------------------------------------------------------------------------------
    def loss(self, kind: str, pred: cla.Array, target: cla.Array) -> tuple[cla.Array, cla.Array]:
        if pred.shape != target.shape:
            raise ValueError(f"loss {kind!r}: prediction {pred.shape} and target {target.shape} differ")
        value = self.empty((1,))
        grad = self.empty(pred.shape)
        arrays = (*self.arg(pred), *self.arg(target), *self.arg(grad), *self.arg(value))
        if kind == "softmax_cce":
            c = pred.shape[-1]
            self._k["softmax_cce_loss"]((1,), *arrays, c, pred.size // c)
        elif kind in _POINTWISE_LOSS:
            self._k["pointwise_loss"]((1,), *arrays, pred.size, _POINTWISE_LOSS[kind])
        else:
            raise ValueError(f"unknown loss {kind!r}: expected mse, mae, softmax_cce or bce")
        return value, grad

    # --- optimizers ---------------------------------------------------------------------------------
    def _update(self, kernel: str, w: cla.Array, tensors: tuple[cla.Array, ...], *scalars) -> None:
        for t in tensors:
            if t.size != w.size:
                raise ShapeError(f"{kernel}: buffers of {t.size} and {w.size} elements differ")
        args = [a for t in (w, *tensors) for a in self.arg(t)]
        if w.size:
            self._k[kernel]((-(-w.size // self._vec),), *args, w.size, *scalars)

    def sgd_update(self, w, g, *, lr, l1, l2) -> None:
        self._update("sgd_update", w, (g,), lr, l1, l2)

    def momentum_update(self, w, g, v, *, lr, momentum, nesterov, l1, l2) -> None:
        self._update("momentum_update", w, (g, v), lr, momentum, int(bool(nesterov)), l1, l2)

    def adagrad_update(self, w, g, acc, *, lr, eps, l1, l2) -> None:
        self._update("adagrad_update", w, (g, acc), lr, eps, l1, l2)

    def rmsprop_update(self, w, g, acc, *, lr, rho, eps, l1, l2) -> None:
        self._update("rmsprop_update", w, (g, acc), lr, rho, eps, l1, l2)

    def adadelta_update(self, w, g, acc_grad, acc_delta, *, lr, rho, eps, l1, l2) -> None:
        self._update("adadelta_update", w, (g, acc_grad, acc_delta), lr, rho, eps, l1, l2)

    def adam_update(self, w, g, m, v, *, lr, beta1, beta2, eps, step, l1, l2) -> None:
        if step < 1:
            raise ValueError(f"Adam step counts from 1, got {step}")
        # Bias corrections in float64 on the host: 1 - beta^t loses digits in float32 for small t.
        c1 = 1.0 / (1.0 - beta1**step)
        c2 = 1.0 / (1.0 - beta2**step)
        self._update("adam_update", w, (g, m, v), lr, beta1, beta2, eps, c1, c2, l1, l2)

    def clip_by_global_norm_(self, g: cla.Array, max_norm: float) -> None:
        if g.size == 0:
            return
        partials = self.arg(self._partials)
        self._k["sumsq_partials"]((_PARTIALS,), *self.arg(g), *partials, g.size)
        self._k["clip_by_norm"]((_PARTIALS,), *self.arg(g), *partials, _PARTIALS, g.size, max_norm)


def _dropout_args(n: int, rate: float, seed: int, counter: int) -> tuple:
    """The dropout kernels' trailing arguments ``(n, seed, counter, threshold, scale)``: element i is dropped
    when its 24 random bits are below ``ceil(rate · 2^24)`` (uniform01 < rate as exact integer arithmetic).
    The kernels index elements with a signed 32-bit ``int``, so ``n`` stays below 2^31."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    if n >= 2**31:
        raise ShapeError(f"dropout: {n} elements exceed the kernels' 32-bit signed index (2^31 - 1 at most)")
    threshold = math.ceil(rate * (1 << 24))
    return n, seed & 0xFFFFFFFF, counter & 0xFFFFFFFF, threshold, 1.0 / (1.0 - rate)


def _same_shape(op: str, a: cla.Array, b: cla.Array) -> None:
    if a.shape != b.shape:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} differ")
