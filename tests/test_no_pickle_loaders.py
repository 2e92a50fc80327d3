"""No file, study store or network message is ever unpickled: model, report, study and data files load
without pickle (``nn.io``, JSON, SQLite, ``np.load(..., allow_pickle=False)``).

Unpickling runs code chosen by whoever wrote the bytes, so a shared model file or a study store from
elsewhere would be a way in. The one unpickler allowed is the optimiser's process pool, which reads only
messages its own process sent to the workers it started, over their pipes (``backtests/optimize/pool.py``).
Checked by parsing the sources, so a loader that gains a pickle path fails here before it ships.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("datafeeds", "opencl", "nn", "strategies", "backtests", "neuronet")
# modules whose loaders run code from the bytes they read
UNPICKLERS = {"pickle", "cloudpickle", "dill", "shelve", "marshal", "joblib", "jsonpickle", "_pickle"}
# functions of other libraries that unpickle (``numpy.load`` only when asked to)
UNPICKLING_CALLS = {"read_pickle"}
# the one place that unpickles, and the indicator cache, which names ``shelve.open`` only to refuse to keep
# the values of a function that calls it
ALLOWED = {
    Path("backtests/optimize/pool.py"): {"cloudpickle"},
    Path("backtests/indicator_cache.py"): {"shelve"},
}


def _offences(source: str, name: Path) -> list[str]:
    tree = ast.parse(source, filename=str(name))
    allowed = ALLOWED.get(name, set())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {node.module.split(".")[0]}
        else:
            names = set()
        found += [f"{name}:{node.lineno} imports {n}" for n in names & UNPICKLERS - allowed]
        if isinstance(node, ast.Attribute) and node.attr in UNPICKLING_CALLS:
            found.append(f"{name}:{node.lineno} calls {node.attr}")
        if (
            isinstance(node, ast.keyword)
            and node.arg == "allow_pickle"
            and not (isinstance(node.value, ast.Constant) and node.value.value is False)
        ):
            found.append(f"{name}:{node.lineno} passes allow_pickle other than False")
    return found


@pytest.mark.parametrize("package", OURS)
def test_no_loader_of_ours_can_unpickle(package):
    paths = sorted((ROOT / package).rglob("*.py"))
    offences = [
        o for path in paths for o in _offences(path.read_text(encoding="utf-8"), path.relative_to(ROOT))
    ]
    assert offences == []


def test_the_check_sees_a_pickle_loader():
    """The check can fail: a model loader that unpickles is caught, and so are pandas' and numpy's."""
    source = (
        "import pickle\nimport numpy as np\nimport pandas as pd\n\n"
        "def load(path):\n    return pickle.loads(open(path, 'rb').read())\n\n"
        "def frame(path):\n    return pd.read_pickle(path)\n\n"
        "def arrays(path):\n    return np.load(path, allow_pickle=True)\n"
    )
    offences = _offences(source, Path("nn/io.py"))
    assert sorted(o.split(" ", 1)[1] for o in offences) == [
        "calls read_pickle",
        "imports pickle",
        "passes allow_pickle other than False",
    ]


def test_only_the_pool_may_import_cloudpickle():
    assert _offences("import cloudpickle\n", Path("backtests/optimize/pool.py")) == []
    assert _offences("import cloudpickle\n", Path("backtests/optimize/store.py")) != []
