"""The backend contract (nn.backend) says everything the layers use, and both backends keep it.

- every op of every family ``Protocol`` exists on both backends with the declared parameters (names, kinds,
  defaults), checked with ``inspect`` on real backend objects;
- the layer modules call no backend method outside the contract (parsed from their sources);
- the NumPy backend trains without importing pyopencl (the OpenCL side is imported only when asked for).
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nn.backend import FAMILIES, Backend, CoreOps, family_ops

NN = Path(__file__).resolve().parents[2] / "nn"
# Modules that implement the contract (they call their own helpers, not the contract).
IMPLEMENTATIONS = {"backend.py", "ops_numpy.py", "ops_opencl.py", "online_opencl.py"}
ATTRIBUTES = {"name", "dtype", "alignment"}  # the contract's data members


def _declared() -> dict[str, inspect.Signature]:
    return {op: inspect.signature(getattr(family, op)) for family in FAMILIES for op in family_ops(family)}


def _numpy_backend():
    from nn.ops_numpy import NumpyBackend

    return NumpyBackend()


def _opencl_backend():
    try:
        from nn.ops_opencl import OpenCLBackend

        return OpenCLBackend()
    except Exception as exc:  # no OpenCL runtime here: the NumPy half of the contract is still checked
        pytest.skip(f"no OpenCL backend: {exc}")


def _shape(sig: inspect.Signature, bound: bool) -> list[tuple[str, object, bool, object]]:
    params = list(sig.parameters.values())[0 if bound else 1 :]  # the Protocol's functions take self
    return [(p.name, p.kind, p.default is inspect.Parameter.empty, p.default) for p in params]


@pytest.mark.parametrize("make", [_numpy_backend, _opencl_backend], ids=["numpy", "opencl"])
def test_backend_implements_every_declared_op(make):
    backend = make()
    assert isinstance(backend, Backend)
    missing, differing = [], []
    for op, declared in _declared().items():
        impl = getattr(backend, op, None)
        if not callable(impl):
            missing.append(op)
            continue
        if _shape(inspect.signature(impl), bound=True) != _shape(declared, bound=False):
            differing.append(f"{op}{inspect.signature(impl)} vs declared {op}{declared}")
    assert not missing, f"{type(backend).__name__} lacks {missing}"
    assert not differing, "\n".join(differing)
    for attr in ATTRIBUTES:
        assert hasattr(backend, attr)


def test_families_are_disjoint_and_the_core_is_complete():
    """An op belongs to one family only (a new family cannot silently shadow another's op)."""
    seen: dict[str, str] = {}
    for family in FAMILIES:
        for op in family_ops(family):
            assert op not in seen, f"{op} declared by {seen[op]} and {family.__name__}"
            seen[op] = family.__name__
    assert {"dense_forward", "loss", "adam_update", "online_epoch"} <= set(family_ops(CoreOps))
    assert len(seen) >= 69  # complex layers draw their dropout masks with the core dropout_mask


def _backend_expr(node: ast.expr) -> bool:
    """``be``, ``backend``, ``self.backend``, ``model.backend``, ``self.be`` ..."""
    if isinstance(node, ast.Name):
        return node.id in ("be", "backend")
    return isinstance(node, ast.Attribute) and node.attr in ("backend", "be")


def _used_backend_members(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and _backend_expr(node.value)
    }


def test_layers_use_only_the_contract():
    allowed = set(_declared()) | ATTRIBUTES
    layer_modules = [
        p for p in sorted(NN.glob("*.py")) if p.name not in IMPLEMENTATIONS and "_ops_" not in p.name
    ]
    assert any(p.name == "attention.py" for p in layer_modules)
    outside = {
        f"{p.name}: backend.{name}" for p in layer_modules for name in _used_backend_members(p) - allowed
    }
    assert not outside, f"backend members used outside nn.backend's contract: {sorted(outside)}"


def test_contract_check_sees_a_call_outside_the_contract(tmp_path):
    """The source check is not vacuous: a made-up op is reported."""
    module = tmp_path / "layer.py"
    module.write_text("def f(self, x):\n    return self.backend.fancy_op(x) + be.bmm(x, x)\n")
    assert _used_backend_members(module) - set(_declared()) == {"fancy_op"}


def test_numpy_backend_does_not_import_pyopencl():
    code = (
        "import sys, numpy as np\n"
        "import nn\n"
        "m = nn.Sequential.from_specs([{'type': 'dense', 'units': 3, 'activation': 'softmax'}], (4,),\n"
        "                             loss='cce', optimizer={'type': 'adam'}, backend='numpy', seed=1)\n"
        "x = np.random.default_rng(0).normal(size=(9, 4)); y = np.eye(3)[[0, 1, 2] * 3]\n"
        "m.fit(x, y, epochs=1, batch_size=1, progress=False); m.predict(x)\n"
        "assert 'pyopencl' not in sys.modules, 'pyopencl was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_declared_tensor_type_names_both_backends():
    from nn import backend

    assert "np.ndarray" in backend.Tensor and "cla.Array" in backend.Tensor
    assert np.ndarray  # the alias is a string: annotations only, no pyopencl import at runtime
