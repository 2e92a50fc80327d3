"""A small builder of ONNX graphs: named constants and nodes, one output each, in the order they are made.

The exporters write their arithmetic through it (``g.op("Add", a, b)``) so a graph reads like the NumPy it
mirrors. Opset ``OPSET`` is the ONNX 1.12 operator set: ONNX Runtime 1.14, the runtime MetaTrader 5 embeds,
implements opsets up to 18 (ONNX Runtime's versioning table), and every operator used here has had a CPU
kernel at its opset-17 version since ONNX Runtime 1.12 (``ALLOWED``, checked on every exported graph).
"""

from __future__ import annotations

from typing import Any

import numpy as np

OPSET = 17
IR_VERSION = 8  # ONNX 1.10..1.13 write IR 8; ONNX Runtime 1.14 reads up to IR 8

# Every operator an exported graph may hold, with the operator version that opset 17 resolves to. Each one
# is in ONNX Runtime 1.14's CPU kernel list (docs/OperatorKernels.md of that release) for these versions.
ALLOWED = {
    "Abs": 13, "Add": 14, "Cast": 13, "Clip": 13, "Concat": 13, "Constant": 13, "Div": 14, "Equal": 13,
    "Erf": 13, "Exp": 13, "Floor": 13, "Gather": 13, "Gemm": 13, "Greater": 13, "Less": 13, "Log": 13,
    "MatMul": 13, "Max": 13, "Min": 13, "Mul": 14, "Neg": 13, "ReduceMax": 13, "ReduceMean": 13,
    "ReduceSum": 13, "Relu": 14, "Reshape": 14, "Sigmoid": 13, "Slice": 13, "Softmax": 13, "Softplus": 1,
    "Sqrt": 13, "Sub": 14, "Tanh": 13, "Transpose": 13, "Unsqueeze": 13, "Where": 16, "LeakyRelu": 16,
    "ArgMax": 13, "Sin": 7, "Cos": 7, "Pow": 15,
}  # fmt: skip
# Operators whose ONNX Runtime 1.14 CPU kernel takes float32 only (no float64 kernel: the float64 graphs of
# the forecasters cast around them); every other operator above runs float64 too.
FLOAT_ONLY = {"Erf", "Softplus", "Cos"}
FLOAT, DOUBLE = 1, 11  # onnx.TensorProto.FLOAT and DOUBLE (onnx is imported only while exporting)


class Graph:
    """Nodes and initialisers of one graph; ``op`` returns the name of the node's (single) output."""

    def __init__(self) -> None:
        import onnx  # the optional dependency is needed only while exporting

        self.onnx = onnx
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0
        self._consts: dict[tuple, str] = {}

    def _name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, value: Any, dtype: Any = np.float64) -> str:
        """An initialiser holding ``value`` (scalars and small repeated constants are shared)."""
        a = np.asarray(value, dtype=dtype)
        key = (a.dtype.str, a.shape, a.tobytes()) if a.size <= 16 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        name = self._name("c")
        self.initializers.append(self.onnx.numpy_helper.from_array(a.copy(order="C"), name))
        if key is not None:
            self._consts[key] = name
        return name

    def ints(self, *values: int) -> str:
        """An int64 vector constant (axes, shapes, slice bounds)."""
        return self.const(list(values), np.int64)

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        if op_type not in ALLOWED:
            raise ValueError(f"operator {op_type} is outside the exported operator set")
        out = self._name(op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def rename(self, name: str, new: str) -> str:
        """Give the value ``name`` the graph-output name ``new`` (an Identity-free rename of its producer)."""
        for node in self.nodes:
            node.output[:] = [new if o == name else o for o in node.output]
            node.input[:] = [new if i == name else i for i in node.input]
        return new

    # -- arithmetic shorthands -------------------------------------------------------------------------
    def add(self, a: str, b: str) -> str:
        return self.op("Add", a, b)

    def sub(self, a: str, b: str) -> str:
        return self.op("Sub", a, b)

    def mul(self, a: str, b: str) -> str:
        return self.op("Mul", a, b)

    def div(self, a: str, b: str) -> str:
        return self.op("Div", a, b)

    def cols(self, x: str, start: int, stop: int, axis: int = 1) -> str:
        """``x[..., start:stop]`` along ``axis``."""
        return self.op("Slice", x, self.ints(start), self.ints(stop), self.ints(axis))

    def matmul(self, a: str, b: str) -> str:
        return self.op("MatMul", a, b)

    def reshape(self, x: str, *shape: int) -> str:
        """``x`` reshaped to ``shape`` (``-1``: the batch, whatever its size)."""
        return self.op("Reshape", x, self.ints(*shape))

    def transpose(self, x: str, *perm: int) -> str:
        return self.op("Transpose", x, perm=list(perm))

    def take(self, x: str, index: int, axis: int) -> str:
        """``x`` at ``index`` along ``axis``, that axis removed (``numpy.take`` with a scalar index)."""
        return self.op("Gather", x, self.const(index, np.int64), axis=axis)

    def unsqueeze(self, x: str, axis: int) -> str:
        return self.op("Unsqueeze", x, self.ints(axis))

    def model(self, inputs: list, outputs: list, metadata: dict[str, str], doc: str):
        """The ``ModelProto`` at ``OPSET``, checked by ``onnx.checker``."""
        h = self.onnx.helper
        graph = h.make_graph(self.nodes, "neuronet", inputs, outputs, self.initializers)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="neuronet",
                             doc_string=doc, ir_version=IR_VERSION)  # fmt: skip
        for key, value in metadata.items():
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
        self.onnx.checker.check_model(model, full_check=True)
        return model
