"""Scaled dot-product self-attention of one (sample, head) per work-group, for the GPU layout.

``AttentionOpenCLOps.self_attention_forward`` / ``_backward`` run these kernels
(``opencl/kernels/self_attention.cl``) where a head's operands fit the work-group's local memory, and the
composed ops (permuted copies, strided products, row softmax) elsewhere. A work-group loads its head's q, k,
v straight out of the fused projection ``(B, S, 3D)`` and writes the output in ``(B, S, D)`` (the gradient
in the projection's layout): per encoder layer and pass one launch instead of two or three copies, two to
four products, a softmax and a mask product, which were most of PatchTST's time outside its GEMMs on a GPU
(benchmarks/RESULTS.md, ATFNet).
"""

from __future__ import annotations

from opencl.launch import BoundKernel, Launcher, kernel_specs

_GROUP = 128  # items per (sample, head)
KERNELS = kernel_specs(
    "self_attention.cl", "self_attention_forward self_attention_backward", (1,), (_GROUP,), per_group=True
)
_LOCAL_BYTES = 48 * 1024  # the most static local memory OpenCL lets a kernel declare on NVIDIA GPUs
_STEP = 256  # local memory is sized per shape in steps of this many elements (few distinct builds)


class FusedSelfAttention:
    """The fused kernels on a launcher's GPU layout; ``forward``/``backward`` return ``None`` where they do
    not apply (the CPU layout, where PoCL runs barriers slowly and the composed products are vectorised, or
    heads too large for local memory), and the caller composes the ops instead."""

    def __init__(self, launcher: Launcher) -> None:
        self.arg, self.empty = launcher.arg, launcher.empty
        self._launcher = launcher
        self._room = min(_LOCAL_BYTES, launcher.runtime.info.local_mem_bytes) // launcher.dtype.itemsize
        self._built: dict[int, dict[str, BoundKernel]] = {}  # ATT_LOCAL -> the kernels built with it

    def _kernels(self, s: int, e: int) -> dict[str, BoundKernel] | None:
        """The kernels for ``s`` tokens of width ``e`` (q, k, v and the output gradient in rows of ``e + 1``,
        three ``s x s`` blocks), or ``None``."""
        if self._launcher.cpu:
            return None
        need = 4 * s * (e + 1) + 3 * s * s
        if need > self._room:
            return None
        size = min(-(-need // _STEP) * _STEP, self._room)
        kernels = self._built.get(size)
        if kernels is None:
            kernels = self._built[size] = self._launcher.bind(KERNELS, ATT_LOCAL=size)
        return kernels

    def forward(self, qkv, heads: int, scale: float, causal: bool, mask):
        """``(o, a)`` as ``AttentionOps.self_attention_forward``, or ``None``."""
        b, s, width = qkv.shape
        d = width // 3
        kernels = self._kernels(s, d // heads)
        if kernels is None:
            return None
        o, a = self.empty((b, s, d)), self.empty((b * heads, s, s))
        m = a if mask is None else mask  # read only with a mask
        kernels["self_attention_forward"](
            (b * heads,), *self.arg(qkv), *self.arg(m), *self.arg(a), *self.arg(o), s, heads, d // heads,
            scale, int(causal), int(mask is not None),
        )  # fmt: skip
        return o, a

    def backward(self, qkv, a, mask, go, heads: int, scale: float):
        """``gqkv`` as ``AttentionOps.self_attention_backward``, or ``None``."""
        b, s, width = qkv.shape
        e = width // 3 // heads
        kernels = self._kernels(s, e)
        if kernels is None:
            return None
        gqkv = self.empty(qkv.shape)
        m = a if mask is None else mask
        kernels["self_attention_backward"](
            (b * heads,), *self.arg(qkv), *self.arg(a), *self.arg(m), *self.arg(go), *self.arg(gqkv), s,
            heads, e, scale, int(mask is not None),
        )  # fmt: skip
        return gqkv
