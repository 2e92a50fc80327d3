"""The package layering and size budget, checked by parsing the sources (no imports executed).

Arrows point one way: datafeeds and opencl import nothing of ours; nn builds on opencl; strategies on nn and
datafeeds; backtests on those; the neuronet CLI sits on top. A module that breaks an arrow would make a
lower layer depend on a higher one (e.g. the data feeds pulling in OpenCL), which these tests forbid.

Four modules cross every arrow: ``neuronet.errors``, the base class of all user-fixable errors,
``neuronet.atomic``, the one atomic file writer (the data feeds and the model files both write),
``neuronet.userfiles``, the one reader of files users name (regular files only), and
``neuronet.cachedir``, the user cache folder (candles and OpenCL device verdicts). They may be imported
from anywhere because they import nothing of ours but the error base (checked below), so they add no layer
to their importers.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("datafeeds", "opencl", "nn", "strategies", "backtests", "neuronet")
ALLOWED = {
    "datafeeds": set(),
    "opencl": set(),
    "nn": {"opencl"},
    "strategies": {"nn", "datafeeds"},
    "backtests": {"strategies", "datafeeds", "nn"},
    "neuronet": set(OURS),
}
MAX_LINES = 600
# Importable by every package; they import nothing of ours but the error base.
SHARED = {"neuronet.errors", "neuronet.atomic", "neuronet.userfiles", "neuronet.cachedir"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _imported_top_levels(path: Path, shared_ok: bool = False) -> set[str]:
    return {m.split(".")[0] for m in _imported_modules(path) if not (shared_ok and m in SHARED)}


@pytest.mark.parametrize("package", OURS)
def test_import_arrows_point_one_way(package):
    offenders = []
    for path in _modules(package):
        ours = (_imported_top_levels(path, shared_ok=True) & set(OURS)) - {package}
        bad = ours - ALLOWED[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


def test_the_shared_error_module_imports_nothing():
    """``neuronet.errors`` (and the package's ``__init__`` that importing it runs) stay dependency-free."""
    for path in (ROOT / "neuronet" / "errors.py", ROOT / "neuronet" / "__init__.py"):
        assert _imported_modules(path) <= {"__future__"}, path


@pytest.mark.parametrize("module", ["atomic", "cachedir"])
def test_the_shared_modules_import_only_the_standard_library(module):
    """``neuronet.atomic`` and ``neuronet.cachedir`` are imported by the lowest layers: nothing of ours,
    nothing third-party."""
    imported = _imported_top_levels(ROOT / "neuronet" / f"{module}.py")
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_the_user_file_reader_imports_only_the_standard_library_and_the_error_base():
    """``neuronet.userfiles`` opens the files users name, for ``datafeeds`` and ``nn`` alike."""
    imported = _imported_modules(ROOT / "neuronet" / "userfiles.py")
    tops = {m.split(".")[0] for m in imported - {"neuronet.errors"}}
    assert tops <= set(sys.stdlib_module_names) | {"__future__"}, imported


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement: inside functions and
    ``TYPE_CHECKING`` blocks too (a type-only import is still one module knowing another's classes).
    ``from pkg import name`` points at ``pkg.name`` where that is a module, else at the package's
    ``__init__``, which runs it."""
    modules = {_module_of(p): p for p in _modules(package)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import path round each circle (depth-first search; each circle reported once)."""
    found, done, path = [], set(), []

    def visit(module: str) -> None:
        path.append(module)
        for target in sorted(graph[module]):
            if target in path:
                found.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)
    return found


@pytest.mark.parametrize("package", ["nn", "strategies"])
def test_no_import_circles_inside_a_package(package):
    """The op layer knows no model: ``nn.backend`` and the OpenCL ops do not import ``nn.model``, and the
    fused epoch gets a plain description of the network (``nn.dense_stack``) instead of the model."""
    circles = _circles(_import_graph(package))
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_nn_does_not_depend_on_pandas():
    offenders = [str(p.relative_to(ROOT)) for p in _modules("nn") if "pandas" in _imported_top_levels(p)]
    assert not offenders


def test_modules_stay_small():
    big = []
    for package in OURS:
        for path in _modules(package):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                big.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not big, f"modules over {MAX_LINES} lines (split them by job):\n" + "\n".join(big)


def _code_strings(path: Path) -> list[str]:
    """String constants of a module other than docstrings (which may show a kernel signature)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_no_kernel_source_in_python_strings():
    """Kernels live in .cl files; a __kernel in a Python string would bypass the build cache and tests."""
    offenders = [
        str(p.relative_to(ROOT))
        for package in OURS
        for p in _modules(package)
        if any("__kernel" in s for s in _code_strings(p))
    ]
    assert not offenders


def _private_names_defined(tree: ast.Module) -> set[str]:
    """Private attribute names a module's own classes define (methods, ``self._x = ...``, ``__slots__``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("_"):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_"):
            names.add(node.value)  # __slots__ entries
    return names


# Third-party internals with no public equivalent, each named with its reason.
THIRD_PARTY_PRIVATE = {
    # optuna 5 has no public read of a live trial's system attributes (NSGA-II's generation bookkeeping),
    # which a resumed study needs to continue the genetic search where it stopped.
    "backtests/optimize/search.py": {"_storage", "_trial_id"},
    # Python < 3.14's ProcessPoolExecutor has no public handle on its processes (3.14 adds
    # terminate_workers); Ctrl-C must stop workers that run long passes.
    "backtests/optimize/pool.py": {"_processes"},
}


@pytest.mark.parametrize("package", ["strategies", "backtests"])
def test_no_module_reads_another_modules_private_parts(package):
    """``obj._x`` is allowed only where ``_x`` belongs to the same module (e.g. Bars and its BarFeed)."""
    offenders = []
    for path in _modules(package):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own = _private_names_defined(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
                continue
            if node.attr.startswith("__") or node.attr in own:
                continue
            if node.attr in THIRD_PARTY_PRIVATE.get(str(path.relative_to(ROOT)), set()):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue  # inherited private helpers are the class's own business
            offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, "\n".join(offenders)
