"""The expert advisor a command runs and the parameters it is given, on the command line: the EA argument
(``resolve_ea``: a built-in by name or a user's ``FILE.py:ClassName``), ``-p NAME=VALUE`` and ``@FILE.set``
(``ea_params``, ``set_file``) and the options that set a parameter of the EA (``--epochs``,
``--batch-size``, ``--backend``). ``backtest``, ``run``, ``optimize``, ``robustness`` and ``live`` read
an EA the same way.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from neuronet.commands import values
from neuronet.commands.errors import CommandError, CommandLookupError
from strategies import BUILTIN, ExpertAdvisor
from strategies.setfile import SetFile, SetFileError, read_set


def resolve_ea(target: str) -> type[ExpertAdvisor]:
    """A built-in EA by name, or ``file.py[:ClassName]`` (the only EA in the file when no name is given)."""
    if ".py" not in target:
        if target.lower() in BUILTIN:
            return BUILTIN[target.lower()]
        close = difflib.get_close_matches(target.lower(), list(BUILTIN), n=1)
        hint = f"did you mean {BUILTIN[close[0]].__name__}? " if close else ""
        raise CommandLookupError(
            f"unknown EA {target!r}: {hint}use a built-in ({', '.join(_names())}) or FILE.py:ClassName"
        )
    head, _, name = target.partition(".py")
    path = Path(head + ".py")
    name = name.lstrip(":")
    if not path.is_file():
        raise FileNotFoundError(f"EA file not found: {path}")
    module_name = f"neuronet_user_ea_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    # Reading the user's EA leaves their folder as it was: no ``__pycache__`` written beside their file.
    kept, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise CommandError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:
        raise CommandError(f"cannot import {path}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.dont_write_bytecode = kept
    found = {
        n: obj
        for n, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, ExpertAdvisor) and obj.__module__ == module_name
    }
    if not name:
        if len(found) != 1:
            listed = ", ".join(sorted(found)) or "none"
            raise CommandLookupError(
                f"{path} defines {len(found)} expert advisors ({listed}); name one as {path}:ClassName"
            )
        return next(iter(found.values()))
    obj = getattr(module, name, None)
    if obj is None:
        listed = ", ".join(sorted(found)) or "none"
        raise CommandLookupError(f"{target}: {path} has no class {name!r} (expert advisors there: {listed})")
    if not (inspect.isclass(obj) and issubclass(obj, ExpertAdvisor)):
        raise CommandError(
            f"{path}:{name} is not an expert advisor: derive it from strategies.ExpertAdvisor "
            "and implement on_bar()"
        )
    return obj


def _names() -> list[str]:
    return sorted({cls.__name__ for cls in BUILTIN.values()})


def ea_params(
    pairs: list[str], ea: type[ExpertAdvisor], option: str = "--param", **shortcuts: Any
) -> dict[str, Any]:
    """``option`` ``key=value`` pairs plus the shortcut options given (``--epochs`` ...); a shortcut that
    this EA has no parameter for is refused, not dropped, and so is a parameter given twice (the second
    would silently win). ``@FILE.set`` reads the inputs of a MetaTrader .set file (UTF-16 or UTF-8); an
    option naming one of them overrides the file's value."""
    out: dict[str, Any] = {}
    defaults = ea.param_defaults()
    for key, value in shortcuts.items():
        if value is None:
            continue
        if key not in defaults:
            raise CommandError(
                f"{_flag(key)}: {ea.__name__} has no {key!r} parameter, so the option would do nothing; "
                f"its parameters: {', '.join(sorted(defaults)) or 'none'}"
            )
        out[key] = value
    given: set[str] = set()
    from_files: dict[str, str] = {}
    for pair in pairs:
        if pair.startswith("@"):  # a MetaTrader .set file: its values, which NAME=VALUE options override
            from_files.update(set_file(option, pair, ea).values)
    for key, value in from_files.items():
        if key not in out:  # a shortcut option (--epochs) overrides the file's value too
            out[key] = value
    for pair in pairs:
        if pair.startswith("@"):
            continue
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CommandError(f"{option} {pair!r}: expected NAME=VALUE")
        if key in given or (key in out and key not in from_files):
            also = "given twice" if key in given else f"{_flag(key)} gives it too"
            raise CommandError(f"{option} {key}=...: {also}; give each parameter once")
        given.add(key)
        out[key] = value.strip()
    return out


def set_file(option: str, spec: str, ea: type[ExpertAdvisor]) -> SetFile:
    """The .set file of ``-p @FILE``, read for ``ea``; its errors name the option too."""
    try:
        return read_set(spec[1:], ea)
    except SetFileError as exc:
        raise SetFileError(f"{option} {spec}: {exc}") from None
    except OSError as exc:
        raise type(exc)(f"{option} {spec}: {exc}") from None


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


_FRACTAL = BUILTIN["fractalea"].param_defaults()

EaArg = Annotated[
    str, typer.Argument(help=f"FILE.py:ClassName or a built-in: {', '.join(sorted(_names()))}.")
]
Epochs = Annotated[
    int | None,
    typer.Option(
        "--epochs",
        help=f"Maximum training epochs (FractalEA: {_FRACTAL['epochs']}; it stops once the loss on the "
        f"newest {_FRACTAL['validation']:.0%} of the study rows has not improved for {_FRACTAL['patience']} "
        "epochs and keeps the best epoch; -p validation=0: exactly this many). Refused for an EA that does "
        "not train.",
        min=0,
        max=values.MAX_COUNT,
    ),
]
BatchSize = Annotated[
    int | None,
    typer.Option(
        "--batch-size", help="Training batch size; 1 = MQL5 online mode.", min=1, max=values.MAX_COUNT
    ),
]
BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Network backend: auto (default: the best usable OpenCL device, else NumPy), numpy, opencl "
        "or opencl:<device> (as `neuronet devices --device`).",
        parser=values.backend,
    ),
]
Param = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        help="EA parameter NAME=VALUE (repeatable), or @FILE.set: the inputs of a MetaTrader .set file.",
        parser=values.text,
    ),
]
