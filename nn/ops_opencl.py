"""The OpenCL backend: every ``nn.backend.Backend`` op as one kernel launch on device-resident tensors.

Tensors are ``pyopencl.array.Array`` allocated from the runtime's memory pool; an op enqueues its kernel
and returns without waiting, so a training step is a stream of launches with no host round trip (only
``to_numpy`` reads back). Kernels live in ``opencl/kernels/*.cl`` (elementwise, activations, softmax_loss,
batchnorm, dropout, optim, reduce, dense_small) and are built once per runtime with ``-D REAL=float|double``
and the work-group layout chosen here for the device kind. Dense layers use ``opencl.blas.gemm`` with its
fused bias + activation epilogue, except batches of at most ``SMALL_B`` rows (online training), which take
matrix-vector kernels: one launch forward, one backward on GPUs (two on CPUs), no packing of the weight
matrix.

Work-group layouts. CPU (PoCL): local-memory barriers are slow and PoCL cannot vectorise across items
whose body is a loop, so reductions and column/row kernels give each item 8 adjacent columns (or one row)
as explicit 8-wide vectors and loop over the other axis; single-group reductions use one item. GPU:
reductions use 256-item groups with local-memory trees, column kernels (32 columns x 8 row lanes) groups.
Both layouts are tested on any device (``layout=``).

Extension mixins (attention, complex ops) build on four helpers: ``self.runtime``, ``self.kernels(file,
**defines)``, ``self.empty(shape)`` and ``self.launch(kernel, global_size, local_size, *args)`` with
array arguments expanded by ``self.arg(t)`` into (buffer, element offset) as ``opencl.memory`` describes.
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from nn.attention_ops_opencl import AttentionOpenCLOps
from nn.backend import ACTIVATIONS, Activation
from nn.complex_ops_opencl import ComplexOpenCLOps
from nn.rbm_ops_opencl import RBMOpenCLOps
from opencl import get_runtime, memory
from opencl import kernels as build_kernels
from opencl.blas import gemm
from opencl.errors import ShapeError
from opencl.memory import DeviceArray

_FILES = (
    "elementwise.cl",
    "activations.cl",
    "softmax_loss.cl",
    "batchnorm.cl",
    "dropout.cl",
    "optim.cl",
    "reduce.cl",
    "dense_small.cl",
)
_ACT_CODE = {kind: code for code, kind in enumerate(ACTIVATIONS)}
_POINTWISE_LOSS = {"mse": 0, "mae": 1, "bce": 2}
SMALL_B = 4  # batches up to this size take the matrix-vector kernels of dense_small.cl
# GPU layout of the small-batch kernels (dense_small.cl defaults): forward groups of _FWD_ROWS neurons x
# _FWD_LANES lanes; backward groups of _BW_GROUP items, input-gradient groups of _BX_COLS columns.
_FWD_LANES, _FWD_ROWS, _BW_GROUP, _BX_COLS = 32, 2, 256, 8
_PARTIALS = 64  # work-groups of the global-norm reduction (partial sums read by every item afterwards)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


class OpenCLBackend(AttentionOpenCLOps, ComplexOpenCLOps):
    """``Backend`` on an OpenCL device (float32 by default, float64 where the device has fp64).

    The attention and complex-valued ops come from their mixin modules, as on the NumPy backend."""

    def __init__(
        self, device=None, dtype=None, profile: bool | None = None, *, layout: str | None = None
    ) -> None:
        """``device``/``dtype`` as ``opencl.get_runtime`` takes them; ``profile`` records per-kernel device
        time (default: the ``NEURONET_PROFILE`` environment variable). ``layout`` ("cpu" or "gpu") overrides
        the work-group layout chosen from the device kind, so the GPU kernels can be tested on a CPU."""
        super().__init__()
        rt = get_runtime(device, dtype, profile)
        self.runtime = rt
        self.name = f"opencl:{rt.info.name}"
        self.dtype = rt.dtype
        self.alignment = rt.alignment
        self._queue = rt.queue
        self._context = rt.context
        self._profiling = rt.profiler.enabled
        layout = layout or ("cpu" if rt.is_cpu else "gpu")
        if layout not in ("cpu", "gpu"):
            raise ValueError(f"layout must be 'cpu' or 'gpu', got {layout!r}")
        cpu = self._cpu = layout == "cpu"
        # LWG: single-group reduction width; RG x CG: column-kernel work-group; EW: elementwise group.
        self._lwg = 1 if cpu else 256
        self._rg = 1 if cpu else 8
        self._cg = 16 if cpu else 32
        self._ew = 1024 if cpu else 256
        self._row_group = 64 if cpu else 128
        self._neuron_group = 16 if cpu else 64
        self._vec = 8 if cpu else 1  # elements per item of the optimizer and activation kernels
        self._vec_group = 128 if cpu else 256
        defines = {"LWG": self._lwg, "RG": self._rg, "CG": self._cg, "SMALL_B": SMALL_B, "VEC": self._vec}
        if not cpu:
            defines |= {"NN_GPU": 1, "FWD_LANES": _FWD_LANES, "FWD_ROWS": _FWD_ROWS, "BW_GROUP": _BW_GROUP,
                        "BX_COLS": _BX_COLS}
        self._k: dict[str, cl.Kernel] = {}
        for filename in _FILES:
            ks = self.kernels(filename, **defines)
            for name in ks.names:
                self._k[name] = ks[name]
        self._allocator = rt.allocator
        self._meta: dict[tuple, tuple] = {}  # (shape, dtype) -> (shape, dtype, strides, size) for empty()
        self._fast_arrays = True
        try:
            self.empty((1,))
        except TypeError:  # a pyopencl without the fast constructor: use the public one
            self._fast_arrays = False
        self._partials = self.empty((_PARTIALS,))
        self.rbm = RBMOpenCLOps(self)  # the RBM op family (nn.rbm_ops); rbm.cl is built on first use

    # --- helpers shared with extension mixins -------------------------------------------------------
    def kernels(self, filename: str, **defines: object):
        """The kept kernels of ``opencl/kernels/<filename>`` for this backend's runtime."""
        return build_kernels(self.runtime, filename, **defines)

    def empty(self, shape: tuple[int, ...], dtype=None) -> cla.Array:
        """An uninitialised pooled array. Uses pyopencl's fast constructor (~2 µs instead of ~15 µs) with
        the shape, strides and size worked out once per (shape, dtype)."""
        try:
            meta = self._meta.get((shape, dtype))
        except TypeError:  # an unhashable shape (a list)
            shape, meta = tuple(shape), None
        if meta is None:
            meta = self._describe(shape, dtype)
        shape, dt, strides, size = meta
        if not self._fast_arrays:
            return DeviceArray(self._queue, shape, dt, allocator=self._allocator)
        return DeviceArray(None, shape, dt, allocator=self._allocator, strides=strides, _fast=True,
                           _size=size, _context=self._context, _queue=self._queue)

    def _describe(self, shape, dtype) -> tuple:
        dims = tuple(int(d) for d in shape)
        dt = self.dtype if dtype is None else np.dtype(dtype)
        strides = cla.empty(self._queue, dims, dt, allocator=self._allocator).strides
        meta = (dims, dt, strides, math.prod(dims))
        self._meta[(shape, dtype)] = meta
        return meta

    def launch(self, kernel: cl.Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               *args) -> None:
        """Enqueue ``kernel``; its device time is recorded when the runtime profiles."""
        if self._profiling:
            self.runtime.launch(kernel, global_size, local_size, *args)
        else:  # the hot path: set_args + enqueue is ~1 us cheaper than calling the kernel object
            kernel.set_args(*args)
            cl.enqueue_nd_range_kernel(self._queue, kernel, global_size, local_size)

    @staticmethod
    def arg(t: cla.Array) -> tuple:
        """(base buffer, element offset): how every kernel of ours receives an array."""
        return t.base_data, t.offset // t.dtype.itemsize

    def _ew_launch(self, kernel: cl.Kernel, n: int, *args) -> None:
        """One item per element, global size rounded up to the elementwise group (kernels guard n).

        The group size is fixed: PoCL compiles one work-group function per distinct local size."""
        ew = self._ew
        self.launch(kernel, ((n + ew - 1) // ew * ew,), (ew,), *args)

    def _per_item(self, kernel: str, items: int, group: int, *args) -> None:
        self.launch(self._k[kernel], ((items + group - 1) // group * group,), (group,), *args)

    def _col_launch(self, kernel: cl.Kernel, cols: int, *args) -> None:
        self.launch(kernel, (_round_up(cols, self._cg), self._rg), (self._cg, self._rg), *args)

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
        if not self._fast_arrays:
            return memory.view(flat, offset, tuple(shape), self.alignment)
        # Same checks as opencl.memory.view, without pyopencl's slicing (~0.1 ms per call).
        shape, dt, strides, size = self._meta.get((shape, flat.dtype)) or self._describe(shape, flat.dtype)
        if flat.ndim != 1:
            raise ShapeError(f"view() needs a 1-D flat tensor, got shape {flat.shape}")
        if offset % self.alignment:
            raise ShapeError(f"view offset {offset} is not a multiple of the alignment {self.alignment}")
        if offset < 0 or offset + size > flat.size:
            raise ShapeError(f"view [{offset}, {offset + size}) exceeds the flat tensor of {flat.size}")
        return DeviceArray(None, shape, dt, data=flat.base_data, offset=flat.offset + offset * dt.itemsize,
                         strides=strides, _fast=True, _size=size, _context=self._context, _queue=self._queue)

    def fill_(self, t: cla.Array, value: float) -> None:
        if t.size:
            self._ew_launch(self._k["fill"], t.size, *self.arg(t), value, t.size)

    def copy_(self, dst: cla.Array, src: cla.Array) -> None:
        _same_shape("copy_", dst, src)
        if dst.size:
            cl.enqueue_copy(self._queue, dst.base_data, src.base_data, byte_count=dst.nbytes,
                            src_offset=src.offset, dst_offset=dst.offset)

    def add_(self, dst: cla.Array, src: cla.Array) -> None:
        _same_shape("add_", dst, src)
        if dst.size:
            self._ew_launch(self._k["add_inplace"], dst.size, *self.arg(dst), *self.arg(src), dst.size)

    def gather_rows(self, src: cla.Array, rows: cla.Array) -> cla.Array:
        if rows.dtype != np.int32 or rows.ndim != 1:
            raise ShapeError(f"gather_rows: rows must be a 1-D int32 tensor, got {rows.dtype} {rows.shape}")
        out = self.empty((rows.shape[0], *src.shape[1:]))
        f = math.prod(src.shape[1:])
        if not out.size:
            return out
        if self._cpu:  # one item per row, 8-wide copies
            self._per_item("gather_rows8", rows.shape[0], 8, *self.arg(src), *self.arg(rows), *self.arg(out),
                           f, rows.shape[0])
        else:  # one item per element: coalesced
            self._ew_launch(self._k["gather_rows"], out.size, *self.arg(src), *self.arg(rows), *self.arg(out),
                            f, out.size)
        return out

    def synchronize(self) -> None:
        self.runtime.synchronize()

    def device_seconds(self) -> float | None:
        """Cumulative kernel time on the device when profiling is on (else ``None``); waits for the queue."""
        return self.runtime.profiler.device_seconds()

    # --- dense --------------------------------------------------------------------------------------
    def dense_forward(self, x: cla.Array, w: cla.Array, b: cla.Array, act: Activation) -> cla.Array:
        if not act.output_derivable:
            raise ValueError(f"activation {act.kind!r} cannot be fused into a dense layer")
        batch, inputs = x.shape
        outputs = w.shape[0]
        y = self.empty((batch, outputs))  # (B, O)
        if batch <= SMALL_B:  # the online-training hot path: (buffer, offset) pairs spelled out inline
            n = y.dtype.itemsize
            args = (x.base_data, x.offset // n, w.base_data, w.offset // n, b.base_data, b.offset // n,
                    y.base_data, y.offset // n, inputs, outputs, batch, _ACT_CODE[act.kind], act.alpha,
                    act.beta)
            if self._cpu:  # 4 neurons per item, 8-wide vectors
                self._per_item("dense_small_forward", -(-outputs // 4), self._neuron_group, *args)
            else:  # FWD_ROWS neurons per group, FWD_LANES lanes over the inputs of each
                self.launch(self._k["dense_small_forward_gpu"], (_FWD_LANES, _round_up(outputs, _FWD_ROWS)),
                            (_FWD_LANES, _FWD_ROWS), *args)
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
            self.launch(self._k["dense_small_backward_gpu"], ((wg + xg) * _BW_GROUP,), (_BW_GROUP,),
                        gy.base_data, gy.offset // n, y.base_data, y.offset // n, x.base_data, x.offset // n,
                        w.base_data, w.offset // n, gw_out.base_data, gw_out.offset // n, gb_out.base_data,
                        gb_out.offset // n, g.base_data, g.offset // n, inputs, outputs, batch,
                        _ACT_CODE[act.kind], act.alpha, wg)
            return gx
        dz = self.empty((batch, outputs))
        if batch <= SMALL_B:
            self._per_item("dense_small_backward_w", outputs, self._neuron_group, *self.arg(gy), *self.arg(y),
                           *self.arg(x), *self.arg(dz), *self.arg(gw_out), *self.arg(gb_out), inputs, outputs,
                           batch, _ACT_CODE[act.kind], act.alpha)
            if not need_input_grad:
                return None
            gx = self.empty(x.shape)
            self._per_item("dense_small_backward_x", -(-inputs // 8), self._neuron_group, *self.arg(dz),
                           *self.arg(w), *self.arg(gx), inputs, outputs, batch)
            return gx
        dz_args = (*self.arg(gy), *self.arg(y), *self.arg(dz), *self.arg(gb_out), outputs, batch,
                   _ACT_CODE[act.kind], act.alpha)
        if self._cpu:  # one item per 8 columns, explicit vectors
            self._per_item("dense_dz_bias8", -(-outputs // 8), 4, *dz_args)
        else:
            self._col_launch(self._k["dense_dz_bias"], outputs, *dz_args)
        gemm(self.runtime, dz, x, gw_out, trans_a=True)  # (B, O)ᵀ·(B, I) -> (O, I)
        if not need_input_grad:
            return None
        gx = self.empty(x.shape)
        gemm(self.runtime, dz, w, gx)  # (B, O)·(O, I) -> (B, I)
        return gx

    # --- elementwise activations and softmax --------------------------------------------------------
    def activation_forward(self, x: cla.Array, act: Activation) -> cla.Array:
        y = self.empty(x.shape)
        if x.size:
            self._per_item("activation_forward", -(-x.size // self._vec), self._vec_group, *self.arg(x),
                           *self.arg(y), x.size, _ACT_CODE[act.kind], act.alpha, act.beta)
        return y

    def activation_backward(self, x, y, gy, act: Activation) -> cla.Array:
        # Output-derivable kinds read y, the others x: the unused one may be None.
        x = y if x is None else x
        y = x if y is None else y
        gx = self.empty(gy.shape)
        if gy.size:
            self._per_item("activation_backward", -(-gy.size // self._vec), self._vec_group, *self.arg(x),
                           *self.arg(y), *self.arg(gy), *self.arg(gx), gy.size, _ACT_CODE[act.kind],
                           act.alpha)
        return gx

    def _rows(self, kernel: str, c: int, b: int, *args) -> None:
        group = self._row_group
        self.launch(self._k[kernel], (_round_up(b, group),), (group,), *args, c, b)

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
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        mask = self.empty(shape)
        n = mask.size
        if n >= 2**32:
            raise ShapeError(f"dropout_mask: {n} elements exceed the 32-bit counter space")
        # uniform01 < rate  <=>  its 24-bit integer < ceil(rate * 2^24): exact integer comparison.
        threshold = math.ceil(rate * (1 << 24))
        if n:
            self._ew_launch(self._k["dropout_mask"], n, *self.arg(mask), n, seed & 0xFFFFFFFF,
                            counter & 0xFFFFFFFF, threshold, 1.0 / (1.0 - rate))
        return mask

    def mul(self, a: cla.Array, b: cla.Array) -> cla.Array:
        _same_shape("mul", a, b)
        out = self.empty(a.shape)
        if a.size:
            self._ew_launch(self._k["mul"], a.size, *self.arg(a), *self.arg(b), *self.arg(out), a.size)
        return out

    # --- batch normalization ------------------------------------------------------------------------
    def batchnorm_forward(self, x, gamma, beta, running_mean, running_var, training, momentum, eps):
        batch, features = x.shape
        y = self.empty(x.shape)
        xhat = self.empty(x.shape)
        inv_std = self.empty((features,))
        args = (*self.arg(x), *self.arg(gamma), *self.arg(beta), *self.arg(running_mean),
                *self.arg(running_var), *self.arg(y), *self.arg(xhat), *self.arg(inv_std), features)
        if training and batch > 1:
            if self._cpu:
                self._per_item("batchnorm_forward_train8", -(-features // 8), 4, *args, batch, momentum, eps)
            else:
                self._col_launch(self._k["batchnorm_forward_train"], features, *args, batch, momentum, eps)
        elif x.size:
            self._ew_launch(self._k["batchnorm_forward_infer"], x.size, *args, x.size, eps)
        return y, xhat, inv_std

    def batchnorm_backward(self, gy, xhat, inv_std, gamma, ggamma_out, gbeta_out) -> cla.Array:
        _same_shape("batchnorm_backward", gy, xhat)
        batch, features = gy.shape
        gx = self.empty(gy.shape)
        args = (*self.arg(gy), *self.arg(xhat), *self.arg(inv_std), *self.arg(gamma), *self.arg(gx),
                *self.arg(ggamma_out), *self.arg(gbeta_out), features, batch)
        if self._cpu:
            self._per_item("batchnorm_backward8", -(-features // 8), 4, *args)
        else:
            self._col_launch(self._k["batchnorm_backward"], features, *args)
        return gx

    # --- losses -------------------------------------------------------------------------------------
    def loss(self, kind: str, pred: cla.Array, target: cla.Array) -> tuple[cla.Array, cla.Array]:
        if pred.shape != target.shape:
            raise ValueError(f"loss {kind!r}: prediction {pred.shape} and target {target.shape} differ")
        value = self.empty((1,))
        grad = self.empty(pred.shape)
        group = (self._lwg,)
        arrays = (*self.arg(pred), *self.arg(target), *self.arg(grad), *self.arg(value))
        if kind == "softmax_cce":
            c = pred.shape[-1]
            self.launch(self._k["softmax_cce_loss"], group, group, *arrays, c, pred.size // c)
        elif kind in _POINTWISE_LOSS:
            self.launch(self._k["pointwise_loss"], group, group, *arrays, pred.size,
                                _POINTWISE_LOSS[kind])
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
            self._per_item(kernel, -(-w.size // self._vec), self._vec_group, *args, w.size, *scalars)

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
        size = (_PARTIALS * self._lwg,)
        local = (self._lwg,)
        self.launch(self._k["sumsq_partials"], size, local, *self.arg(g), *self.arg(self._partials),
                            g.size)
        self.launch(self._k["clip_by_norm"], size, local, *self.arg(g), *self.arg(self._partials),
                            _PARTIALS, g.size, max_norm)


def _same_shape(op: str, a: cla.Array, b: cla.Array) -> None:
    if a.shape != b.shape:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} differ")
