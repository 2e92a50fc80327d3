"""One base class for user-fixable errors, and how the command line words each kind of failure."""

import ast
import errno
import importlib
from pathlib import Path

import pytest

from datafeeds.errors import DataError, UnknownNameError
from neuronet.cli import main
from neuronet.commands.errors import CommandError, CommandOSError
from neuronet.errors import NeuronetError
from neuronet.failures import user_message
from strategies import EARuntimeError

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("datafeeds", "opencl", "nn", "strategies", "backtests", "neuronet")


def _error_classes():
    """Every class named ``*Error`` defined in our packages, as (module, name)."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                    yield module, node.name


@pytest.mark.parametrize(("module", "name"), list(_error_classes()), ids=lambda v: v)
def test_every_error_class_derives_from_the_one_base(module, name):
    cls = getattr(importlib.import_module(module), name)
    if cls is EARuntimeError:  # an EA's failure, deliberately not a user error
        assert not issubclass(cls, NeuronetError)
    else:
        assert issubclass(cls, NeuronetError), f"{module}.{name} does not derive from NeuronetError"


def _raise_in(module_name: str, exc: BaseException) -> BaseException:
    """``exc`` raised by a function whose module is ``module_name`` (as if a raise there)."""
    namespace = {"__name__": module_name, "exc": exc}
    exec(compile("def fail():\n    raise exc\n", f"<{module_name}>", "exec"), namespace)
    try:
        namespace["fail"]()
    except BaseException as caught:
        return caught
    raise AssertionError("did not raise")


@pytest.mark.parametrize(
    ("module", "exc", "shown"),
    [
        ("nn.model", ValueError("shapes (3,) and (4,) do not align"), False),  # our bug, not the user's
        ("backtests.broker", KeyError("missing"), False),
        ("my_eas", KeyError("missing"), False),
        ("nn.io", ConnectionResetError(errno.ECONNRESET, "reset"), False),  # not a file-system problem
        ("neuronet.commands.data", CommandError("--format must be mt5 or csv"), True),  # option checks
        ("datafeeds.timeframes", DataError("unknown timeframe 'H7'"), True),  # input checks
        ("datafeeds.sample", UnknownNameError("the embedded sample holds only EURUSD"), True),
        ("neuronet.commands.options", CommandOSError("--out r: cannot create the folder"), True),
        ("datafeeds.candles", ValueError("cannot reshape array"), False),  # a built-in: a bug wherever raised
        ("neuronet.commands.data", KeyError("close"), False),
        ("nn.io", PermissionError("model.nnz: permission denied"), True),
        ("backtests.report", OSError(errno.ENOSPC, "No space left on device"), True),
        ("nn.model", NeuronetError("a user-fixable problem"), True),
    ],
)
def test_which_failures_are_the_users(module, exc, shown):
    message = user_message(_raise_in(module, exc))
    assert (message is not None) == shown
    if shown:
        assert message.startswith("error: ")


def test_an_eas_failure_is_worded_as_such():
    exc = EARuntimeError("Breakout", "on_bar", "at bar 7 (2021-01-01 07:00)", KeyError("missing"), 7, None)
    assert user_message(exc) == (
        "error: expert advisor failed: Breakout.on_bar raised at bar 7 (2021-01-01 07:00): "
        "KeyError: 'missing'"
    )


EA_FILE = """
from strategies import ExpertAdvisor


class Broken(ExpertAdvisor):
    def on_init(self):
        raise KeyError("missing")
"""


def test_the_command_line_names_the_ea_hook_and_original_error(tmp_path, capsys):
    path = tmp_path / "eas.py"
    path.write_text(EA_FILE)
    argv = ["backtest", f"{path}:Broken", "--out", str(tmp_path / "r")]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    want = "error: expert advisor failed: Broken.on_init raised before the first bar: KeyError: 'missing'"
    assert err[-1] == want
    with pytest.raises(EARuntimeError) as raised:  # --debug: the traceback, down to the EA's line
        main(["--debug", *argv])
    assert isinstance(raised.value.__cause__, KeyError)


def test_errors_with_parts_survive_pickling():
    """Work done in another process (a Dask worker) hands its errors back whole."""
    import pickle

    import pandas as pd

    from datafeeds.errors import CandleDataError
    from datafeeds.terminal_errors import TerminalTimeoutError

    rows = pd.DataFrame({"close": [1.0]}, index=pd.DatetimeIndex(["2020-01-01"], tz="UTC"))
    for exc in (
        CandleDataError("f.csv", "bad row", rows=rows, lines=pd.Series([7]).to_numpy()),
        CandleDataError("f.csv", "no header", line=1),
        TerminalTimeoutError("slow", code=-10005, transient=True),
    ):
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and str(again) == str(exc)
        assert getattr(again, "line", None) == getattr(exc, "line", None)
        assert getattr(again, "code", None) == getattr(exc, "code", None)


BUILTIN_RAISES = {
    "ValueError", "TypeError", "LookupError", "KeyError", "IndexError", "OSError", "RuntimeError"
}
INPUT_LAYERS = ("datafeeds", "neuronet")  # the code that checks what the user typed and the files they gave


def _builtin_raises(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id in BUILTIN_RAISES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} raises {target.id}")
    return found


def test_input_checks_raise_their_packages_error_classes():
    """A built-in error is a bug (``internal error``); a check of the user's input says so by its class."""
    offenders = [
        hit
        for package in INPUT_LAYERS
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in _builtin_raises(path)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_new_error_classes_keep_the_builtin_families():
    """Callers that caught ``ValueError``/``LookupError``/``OSError`` before keep working."""
    from datafeeds.errors import DataTypeError
    from neuronet.commands.errors import CommandLookupError

    assert issubclass(DataError, ValueError) and issubclass(DataTypeError, TypeError)
    assert issubclass(UnknownNameError, LookupError) and issubclass(CommandLookupError, LookupError)
    assert issubclass(CommandError, ValueError) and issubclass(CommandOSError, OSError)
