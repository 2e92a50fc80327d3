"""A whole online (batch size 1) epoch of a dense network in one kernel launch, on NVIDIA GPUs.

``Sequential.fit(batch_size=1)`` normally runs every sample as a separate training step of ~15 kernel
launches; on a GPU the host's enqueue cost then bounds the epoch (microseconds per launch against
sub-microsecond kernels). ``OnlineEpoch`` runs the same steps inside one persistent kernel
(``opencl/kernels/online_dense.cl``) whose work-groups meet at grid-wide barriers between the phases of a
step. It applies where that kernel computes exactly what the step-by-step path computes:

- a dense network as ``nn.dense_stack`` describes it (``Sequential`` decides whether a model is one: dense
  layers with output-derivable activations, softmax + cross-entropy on the logits or MSE, Adam without
  gradient clipping, L1/L2 and learning-rate schedules included);
- the OpenCL backend on an NVIDIA GPU, float32, layers up to ``_MAX_WIDTH`` neurons (decided here).

Anything else trains step by step as before; ``OnlineEpoch.build`` returns ``None`` for it, and so does a
backend made with ``fused_online=False`` (the tests compare both paths that way). This module belongs to the
OpenCL side of ``nn``: ``OpenCLBackend.online_epoch`` builds it with itself and the description; it knows
no model.

The kernel's barrier needs all its work-groups resident at once: one group per compute unit, of the
largest size the compiled kernel allows (``CL_KERNEL_WORK_GROUP_SIZE``: its registers and local memory).
A GPU shared through MPS with a partition of its multiprocessors would not give that; use batch sizes
above 1 there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl

from nn.backend import ACT_CODE, Tensor
from nn.dense_stack import LOSSES, AdamStep, DenseStack
from opencl import memory
from opencl.launch import KernelSpec

_LOSS_KINDS = {"softmax_cce": 0, "mse": 1}
assert set(_LOSS_KINDS) == set(LOSSES)
# Work-group sizes to try, largest first: the largest the compiled kernel allows wins (more items hide
# more latency; benchmarks/RESULTS.md has the figures).
_GROUPS = (1024, 512, 256, 128, 64, 32)
_MAX_WIDTH = 4096  # widest layer the kernel's local buffers hold (2 x 16 KiB of its 48 KiB)


class OnlineEpoch:
    """The fused batch-1 epoch of one dense stack on one ``OpenCLBackend`` (built once, reused)."""

    def __init__(self, be: Any, stack: DenseStack, desc: np.ndarray, ab: np.ndarray, y_size: int, width: int):
        self.backend, self.loss = be, _LOSS_KINDS[stack.loss]
        self._desc = be.asarray(desc)
        self._ab = be.asarray(ab)
        self._y = be.zeros((y_size,))  # every layer's output, back to back
        self._g = be.zeros((y_size,))  # the loss gradient with respect to each of them
        self._sync = be.asarray(np.zeros(64, np.int32))  # barrier counter and generation (online_dense.cl)
        self._layers = len(desc)
        device = be.runtime.info.device
        self._kernel = None  # the bound kernel, its work-group the largest the compiled kernel allows
        for group in _GROUPS:
            spec = KernelSpec("online_dense.cl", "online_dense_epoch", (group,), (group,), per_group=True)
            bound = be.launcher.bind((spec,), WG=group, MAX_WIDTH=width)[spec.name]
            if bound.kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device) >= group:
                self._kernel = bound
                break
        self._groups = int(device.max_compute_units)

    @classmethod
    def build(cls, be: Any, stack: DenseStack) -> OnlineEpoch | None:
        """The fused epoch of ``stack`` on the OpenCL backend ``be``, or ``None`` where it does not apply
        (see the module docstring)."""
        if be.dtype != np.float32 or stack.loss not in _LOSS_KINDS or not stack.layers:
            return None
        info = be.runtime.info
        if be.runtime.is_cpu or "nvidia" not in f"{info.platform} {info.device.vendor}".lower():
            return None
        width = max(layer.units for layer in stack.layers)
        if width > _MAX_WIDTH:
            return None
        desc, ab, cursor = [], [], 0
        for layer in stack.layers:
            desc.append([layer.w, layer.b, layer.inputs, layer.units, ACT_CODE[layer.activation], cursor])
            ab.append([layer.alpha, layer.beta])
            cursor += -(-layer.units // be.alignment) * be.alignment
        epoch = cls(be, stack, np.asarray(desc, np.int32), np.asarray(ab, np.float32), cursor, width)
        return epoch if epoch._kernel is not None else None

    def run(
        self, xd: Tensor, yd: Tensor, order: np.ndarray, params: Tensor, moments: list[Tensor], adam: AdamStep
    ) -> Tensor:
        """Train one sample at a time in ``order``; returns the summed per-sample loss (device, ``(1,)``)."""
        be = self.backend
        n = len(order)
        t = adam.done + np.arange(1, n + 1, dtype=np.float64)
        # Bias corrections of each step in float64 on the host, as adam_update computes them.
        corr = np.stack([1.0 / (1.0 - adam.beta1**t), 1.0 / (1.0 - adam.beta2**t)], axis=1)
        order_d = be.asarray(order.astype(np.int32))
        corr_d = be.asarray(corr.astype(np.float32).reshape(-1))
        loss_sum = be.zeros((1,))
        memory.fill(self._sync, 0)
        m, v = moments
        arg = be.arg
        self._kernel(
            (self._groups,),
            *arg(xd), *arg(yd), *arg(order_d), *arg(corr_d), *arg(params), *arg(m), *arg(v),
            self._y.base_data, self._g.base_data, self._desc.base_data, self._ab.base_data,
            loss_sum.base_data, self._sync.base_data, self._layers, n, self.loss,
            adam.lr, adam.beta1, adam.beta2, adam.eps, adam.l1, adam.l2,
        )  # fmt: skip
        return loss_sum
