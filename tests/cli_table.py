"""The table of bad option values that ``test_cli_bad_values.py`` tries on every command of the app.

``BAD`` gives each option (``--name`` for every command that has it, ``COMMAND --name`` for one command,
``COMMAND <name>`` for an argument) the bad values that apply to what it means; ``BASE`` gives each command
the arguments of a run that would be accepted, so a case differs from it in one value only. Placeholders in
``<>`` are files ``prepare_files`` makes once. ``PENDING`` lists the values known to fail in parts changed
elsewhere at the same time, so their marks can go once those changes are merged.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import typer
from typer.testing import CliRunner

from neuronet.cli import app, main

HUGE = "100000000000000000000"  # 1e20: more than any count, beyond 64-bit integers

# Value sets by what an option means. Placeholders in <> are files prepared once (see ``files``).
COUNT = ("0", "-1", "abc", "1.5", "")  # a whole number >= 1
COUNT0 = ("-1", "abc", "1.5", "")  # a whole number >= 0
POSITIVE = ("0", "-5", "nan", "inf", "-inf", "abc", "")  # a finite number > 0
NONNEGATIVE = ("-1", "nan", "inf", "abc", "")  # a finite number >= 0
FINITE = ("nan", "inf", "-inf", "abc", "")  # any finite number
SHARE = ("-0.1", "1", "nan", "inf", "abc")  # a fraction in [0, 1)
NAME = ("", "nosuch")  # one of a fixed set of names
IN_FILE = ("<missing>", "<dir>", "")  # a file to read
DATA_FILE = (*IN_FILE, "<foreign>")  # a file to read that must be of its kind
READ_FILE = (*DATA_FILE, "<fifo>")  # ... that a pipe would block forever
OUT_DIR = ("<file>", "<file>/sub", "")  # a report folder to create
OUT_FILE = ("<dir>", "<file>/sub", "")  # a file to write
FLAG = ()  # takes no value: nothing to try
DATE_FROM = ("", "garbage", "2017-13-45", "2099-01-01")
DATE_TO = ("", "garbage", "1990-01-01")
CLOCK = ("", "garbage", "+25", "+2/xx")
BACKEND = ("", "cuda", "opencl:nosuch")
PERIOD = ("", "garbage", "1", "2", "-1/3", "nan", "inf", "1990-01-01", "2099-01-01")
WALK = ("", "garbage", "0,0", "-1,5", "5", "5,abc", f"{HUGE},500")
FRACTAL_PARAMS = ("", "novalue", "=1", "nosuch=1", "hidden=abc", "hidden=0", "depth=0", "backend=cuda",
                  "epochs=-1", "lr=nan", "lr=-1", "threshold=2", "batch_size=0", "validation=1", "lots=0",
                  "lots=nan", "sl_points=-1", "tp_points=inf", "exit_bars=-1", "optimizer=nosuch",
                  "activation=nosuch", "layers=[1", "rule=7bar", "model=nosuch", "@<missing>", "@<dir>",
                  "@<foreign>", "@<bad-set>")  # fmt: skip
FRACTAL_SPACE = ("", "novalue", "depth=", "depth=abc", "depth=10:5:1", "depth=5:10:0", "depth=5:10:-1",
                 "nosuch=1,2", "depth=1:nan:1", "lr=1e-3:nan:1e-4", "@<missing>", "@<foreign>",
                 "@<bad-set>")  # fmt: skip

# Bad values per option: "--name" for every command that has it, "COMMAND --name" for one command (an
# argument: "COMMAND <name>"). Each entry is (values, what the error line must name) or just values (the
# option's own names; for KEY=VALUE options, the option or the key).
BAD: dict[str, tuple[str, ...]] = {
    # candle data (run, backtest, optimize, data show/export)
    "--source": NAME,
    "--symbol": ("", "NOSUCH"),
    "--symbols-file": (*READ_FILE, "<foreign>", "<bad-symbols>"),
    "--symbols": ("", ",", "EURUSD,EURUSD", "EURUSD,NOSUCH", "EURUSD,../x"),
    "--timeframe": ("", "H7", "M0"),
    "--path": (*READ_FILE, "<bad-candles>"),
    "--from": DATE_FROM,
    "--to": DATE_TO,
    "--broker-tz": CLOCK,
    "--opt": ("", "novalue", "=1", "nosuch=1", "start=2020-01-01"),
    "--seed": (*COUNT0, HUGE),
    "--model": NAME,
    "--m1-csv": (*READ_FILE, "<bad-candles>"),
    "--ticks-csv": (*READ_FILE, "<bad-ticks>"),
    # backtest and run
    "--forward": PERIOD,
    "--walk-forward": WALK,
    "--deposit": POSITIVE,
    "--leverage": POSITIVE,
    "--spread": ("-1", "abc", "1.5", "", HUGE),
    "--commission": NONNEGATIVE,
    "--swap-long": FINITE,
    "--swap-short": FINITE,
    "--margin-hedged": NONNEGATIVE,
    "--hedging": FLAG,
    "--epochs": ("-1", "abc", "1.5", "", HUGE),
    "--batch-size": (*COUNT, HUGE),
    "--backend": BACKEND,
    "--param": FRACTAL_PARAMS,
    "--out": OUT_DIR,
    "--force": FLAG,
    "--progress": FLAG,
    "--config": (*READ_FILE, "<bad-config>", "<bad-config-table>"),
    "--profile": FLAG,
    # robustness of backtest and run (and of neuronet robustness, where the counts must be >= 1)
    "--monte-carlo": (*COUNT0, HUGE),
    "--permutations": (*COUNT0, HUGE),
    "--ruin-drawdown": ("0", "-1", "101", "nan", "inf", "abc", ""),
    "--bootstrap": (*COUNT0, HUGE),
    "--workers": ("-1", "abc", "", HUGE),
    # optimize
    "optimize --param": FRACTAL_SPACE,
    # (value ranges such as depth=0 are the EA's on_init to judge per pass: MetaTrader skips a pass whose
    # OnInit refuses its inputs, as the optimiser does)
    "optimize --set": ("", "novalue", "nosuch=1", "depth=abc", "depth=1.5", "backend=cuda"),
    "optimize --method": NAME,
    "optimize --passes": (*COUNT, HUGE),
    "optimize --criterion": NAME,
    "optimize --forward": ("garbage", "2", "-1/3", "nan", "1990-01-01", "2099-01-01"),
    "optimize --walk-forward": WALK,
    "optimize --anchored": FLAG,
    "optimize --workers": ("-1", "abc", HUGE),
    "optimize --scheduler": ("", "garbage", "tcp://127.0.0.1:notaport", "tcp://127.0.0.1:99999"),
    "optimize --top": ("-1", "abc", HUGE),
    "optimize --heatmap": ("", "garbage", "depth", "depth,depth", "depth,nosuch"),
    "optimize --store": ("", "<dir>", "<foreign>"),
    "optimize --pass-forward": ("garbage", "2", "-1/3", "nan"),
    "optimize --spa-reps": (*COUNT, HUGE),
    "optimize --pbo-splits": (*COUNT, "7", "40", HUGE),
    # export
    "export <source>": (*READ_FILE, "<model>"),  # a deep belief net of neuronet deep is not an EA's
    "export --name": ("", " ", "a/b", "../model", ".hidden", "a:b"),
    "export --last-model": FLAG,
    # robustness
    "robustness <report>": (*READ_FILE, "<candles>"),
    "robustness --monte-carlo": (*COUNT, HUGE),
    "robustness --methods": ("", "nosuch", ",", "trades,nosuch"),
    "robustness --block": (*POSITIVE, "0.5", HUGE),
    "robustness --bootstrap": (*COUNT, HUGE),
    "robustness --permutations": (*COUNT, HUGE),
    "robustness --permutation-block": (*COUNT, "100000", HUGE),  # longer than the forward bars
    "robustness --permute": (*NAME, "study"),
    "robustness --ea": ("", "NoSuchEA", "<missing>.py", "<broken-ea>", "<eas>:Nope"),
    "robustness --scheduler": ("", "garbage", "tcp://127.0.0.1:notaport", "tcp://127.0.0.1:99999"),
    # forecast
    "forecast --csv": (*READ_FILE, "<bad-series>"),
    "forecast --target": NAME,
    "forecast --features": NAME,
    "forecast --seq-len": (*COUNT, HUGE, "1000000"),
    "forecast --pred-len": (*COUNT, HUGE, "1000000"),
    "forecast --split": (*NAME, "50/50/50"),
    "forecast --model": NAME,
    "forecast --preset": NAME,
    "forecast --epochs": (*COUNT, HUGE),
    "forecast --batch-size": (*COUNT, HUGE),
    "forecast --lr": POSITIVE,
    "forecast --patience": COUNT0,
    "forecast --d-model": (*COUNT, "3", "1000000000"),
    "forecast --n-heads": (*COUNT, "3", "1000000000"),
    "forecast --layers": (*COUNT, "1000000000"),
    "forecast --d-ff": (*COUNT, "1000000000"),
    "forecast --dropout": SHARE,
    "forecast --f-scaling": NAME,
    "forecast --protocol": NAME,
    "<ea>": ("NoSuchEA", "<missing>.py", "<dir>.py", "", "<broken-ea>", "<eas>:Nope", "<foreign>:Mine"),
    # live
    "live <journal_arg>": ("extra",),
    "live --symbol": ("", " "),
    "live --timeframe": ("", "H7"),
    "live --opt": (
        "",
        "novalue",
        "nosuch=1",
        "start=2020-01-01",
        "port=abc",
        "port=-1",
        "port=99999",
        "timeout=nan",
        "timeout=-1",
        "timeout=0",
        "host=",
    ),
    "live --paper": FLAG,
    "live --param": ("", "novalue", "nosuch=1", "fast=abc", "fast=1.5", "@<missing>", "@<bad-set>"),
    "live --journal": ("<dir>", ""),
    "live --history": ("-1", "abc", HUGE),
    "live --study-bars": ("-1", "abc", HUGE),
    "live --poll": ("-1", "nan", "inf", "abc"),
    "live --max-quote-age": ("-1", "nan", "inf", "abc"),
    "live --skip-missed": FLAG,
    "live --close-on-exit": FLAG,
    "live --max-bars": (*COUNT, HUGE),
    "live --max-lots": POSITIVE,
    "live --max-positions": (*COUNT, HUGE),
    "live --max-account-positions": (*COUNT, HUGE),
    "live --max-daily-loss": POSITIVE,
    "live --allow-symbol": ("", " "),
    "live --kill-switch": ("", "<dir>"),
    "live --deviation": ("-1", "abc", HUGE),
    "live --out": ("<file>",),
    "live --credentials": READ_FILE,
    # data
    "data show <symbol>": ("", "NOSUCH"),
    "data show <timeframe>": ("", "H7"),
    "data show --bars": ("-1", "abc", ""),
    "data show --from": ("", "garbage", "2017-13-45"),  # an empty window is shown as such
    "data show --to": ("", "garbage"),
    "data export <symbol>": ("", "NOSUCH"),
    "data export <timeframe>": ("", "H7"),
    "data export --out": (*OUT_FILE, "<fifo>"),
    "data export --format": NAME,
    "--repair": FLAG,
    "--no-cache": FLAG,
    "--refresh": FLAG,
    "data validate <file>": (*READ_FILE, "<bad-candles>"),
    "data validate --symbol": ("", " "),
    "data cache list --source": NAME,
    "data cache clear --source": NAME,
    "data cache clear --symbol": ("", "../outside", "/etc"),
    # compare
    "compare <reports>": (*READ_FILE, "<candles>"),
    "compare --out": ("<dir>", "<file>/sub", ""),
    # devices
    "devices --device": ("", "nosuch", "9:9"),
    "devices --recheck": FLAG,
    # deep
    "deep train <data>": READ_FILE,
    "deep train --inputs": ("nosuch", "99", "0"),
    "deep train --targets": ("", "nosuch", "99"),
    "deep train --mnist-images": READ_FILE,
    "deep train --mnist-labels": READ_FILE,
    "deep train --candles": ("", "<missing>", "<dir>", "<foreign>", "<fifo>"),
    "deep train --depth": (*COUNT, HUGE),
    "deep train --max-cases": COUNT0,
    "deep train --layers": ("abc", "0", "-1", "100000000"),
    "deep train --unsupervised-layers": ("-1", "abc", "1.5", "", "101", HUGE),  # 0-100
    "deep train --first-unsupervised": (*COUNT, "100000000", HUGE),
    "deep train --last-unsupervised": (*COUNT, "100000000", HUGE),
    "deep train --head-hidden": ("abc", "0", "-1", "100000000"),
    "deep train --supervised-layers": (*COUNT, "102", HUGE),  # 1-101, the output counted
    "deep train --first-supervised": (*COUNT, "100000000", HUGE),
    "deep train --last-supervised": (*COUNT, "100000000", HUGE),
    "deep train --classifier": FLAG,
    "deep train --model": OUT_FILE,
    "deep train --log": OUT_FILE,
    "deep train --backend": ("", "cuda"),
    "deep train --epochs": (*COUNT, HUGE),
    "deep train --batches": (*COUNT, HUGE),
    "deep train --tries": (*COUNT, HUGE),
    "deep train --chain-start": (*COUNT, HUGE),
    "deep train --chain-end": (*COUNT, HUGE),
    "deep train --chain-rate": ("-1", "nan", "inf"),
    "deep train --lr": POSITIVE,
    "deep train --momentum-start": ("-1", "1.5", "nan"),
    "deep train --momentum-end": ("-1", "1.5", "nan"),
    "deep train --weight-penalty": NONNEGATIVE,
    "deep train --sparsity-penalty": NONNEGATIVE,
    "deep train --sparsity-target": ("-0.1", "1.5", "nan", "inf", "abc", ""),  # [0, 1]
    "deep train --max-no-improvement": (*COUNT0, HUGE),  # 0: stop at the first epoch without a new low
    "deep train --increment-criterion": NONNEGATIVE,
    "deep train --recon": NAME,
    "deep train --recon-error": NAME,
    "deep train --svd": FLAG,
    "deep train --mean-field": FLAG,
    "deep train --greedy-mean-field": FLAG,
    "deep train --anneal": (*COUNT0, HUGE),
    "deep train --anneal-range": NONNEGATIVE,
    "deep train --sup-iter": (*COUNT0, HUGE),  # 0: the annealed weights as they are
    "deep train --sup-tol": NONNEGATIVE,
    "deep train --fine-tune": FLAG,
    "deep train --fine-iter": (*COUNT0, HUGE),
    "deep train --fine-tol": NONNEGATIVE,
    "deep train --sup-penalty": NONNEGATIVE,
    "deep train --seed": COUNT0,
    "deep train --binary-splits": FLAG,
    "deep train --kernel-log": OUT_FILE,
    "<model>": READ_FILE,
    "<data>": READ_FILE,
    "--inputs": ("nosuch", "99"),
    "--targets": ("nosuch", "99"),
    "--mnist-images": READ_FILE,
    "--mnist-labels": READ_FILE,
    "--candles": ("", "<missing>", "<dir>", "<fifo>"),
    "--max-cases": COUNT0,
    "--log": OUT_FILE,
    "deep sample --out": OUT_FILE,
    "deep sample --chain": ("-1", "abc", HUGE),
    "deep sample --rows": (*COUNT, HUGE),
    "deep sample --cols": (*COUNT, HUGE),
    "deep sample --first-case": ("-1", "abc", HUGE),
    "--image": ("", "garbage", "0x0", "3x5"),
    "deep sample --backend": ("", "cuda"),
    "deep sample --seed": COUNT0,
    "deep analyze --fields": OUT_FILE,
    "deep analyze --neurons": (*COUNT, HUGE),
    "deep analyze --activations": OUT_FILE,
    "deep analyze --section": NAME,
    "deep analyze --cmap": NAME,
    "deep analyze --layer": (*COUNT, "99"),
    "deep analyze --neuron": (*COUNT, "99"),
}

# Each command's arguments for a run that would be accepted: (arguments, options). A case sets one option
# (the last of two wins) or replaces one argument. Values in <> are the prepared files.
BASE: dict[str, tuple[list[str], list[str]]] = {
    "devices": ([], []),
    "run": ([], []),
    "backtest": (["FractalEA"], []),
    "optimize": (["FractalEA"], ["-p", "threshold=0.5,0.6"]),
    "forecast": (
        [],
        [
            "--csv",
            "<series>",
            "--target",
            "OT",
            "--backend",
            "numpy",
            "--seq-len",
            "24",
            "--pred-len",
            "12",
            "--preset",
            "cpu",
        ],
    ),
    "live": (["SmaCrossEA"], []),
    "data show": (["EURUSD", "H1"], []),
    "data export": (["EURUSD", "H1"], ["--out", "out.csv"]),
    "data validate": (["<candles>"], []),
    "data cache list": ([], []),
    "data cache clear": ([], []),
    "deep train": (["<table>"], ["--targets", "E", "--backend", "numpy"]),
    "deep test": (["<model>", "<table>"], []),
    "deep sample": (["<model>"], ["--backend", "numpy", "--chain", "2"]),
    "deep analyze": (["<model>", "<table>"], []),
    "export": (["<report>"], ["--out", "exported"]),
    "robustness": (["<report>"], []),
    "compare": (["<report>", "<report>"], ["--out", "compared.html"]),
}
LIVE_LIMITS = ["--live", "--max-lots", "1", "--max-positions", "1", "--max-daily-loss", "100",
               "--allow-symbol", "EURUSD"]  # fmt: skip
# The options of neuronet robustness that act in its permutation test only: the EA, its data, the workers.
PERMUTATION_OPTIONS = ("--permutation-block", "--permute", "--ea", "--workers", "--scheduler",
                       "--source", "--symbol", "--timeframe", "--path", "--from", "--to", "--broker-tz",
                       "--opt")  # fmt: skip
# Options that act only with others: the options that make them act.
WITH: dict[str, list[str]] = {
    **{f"data {c} --seed": ["--source", "synthetic"] for c in ("show", "export")},
    "--m1-csv": ["--model", "ohlc1m"],
    "--symbols-file": ["--symbols", "EURUSD,GBPUSD"],
    "--ticks-csv": ["--model", "ticks"],
    "optimize --anchored": ["--walk-forward", "2000,500"],
    **{
        f"live {o}": LIVE_LIMITS
        for o in (
            "--max-lots",
            "--max-positions",
            "--max-daily-loss",
            "--allow-symbol",
            "--kill-switch",
            "--deviation",
        )
    },
    "deep train --mnist-images": ["--mnist-labels", "<labels>"],
    "deep train --mnist-labels": ["--mnist-images", "<images>"],
    "deep train --depth": ["--candles", "sample", "--max-cases", "300"],
    **{f"deep {c} --inputs": ["--targets", "E"] for c in ("test", "analyze")},
    **{f"deep {c} --mnist-labels": ["--mnist-images", "<images>"] for c in ("test", "analyze")},
    **{f"deep analyze {o}": ["--activations", "acts.txt"] for o in ("--section", "--layer", "--neuron")},
    **{f"deep analyze {o}": ["--fields", "fields.png"] for o in ("--neurons", "--image")},
    **{
        f"deep sample {o}": ["--first-case", "1"]
        for o in ("<data>", "--mnist-images", "--mnist-labels", "--candles")
    },
    "deep sample --inputs": ["--first-case", "1", "<table>"],  # the table, an argument, after the options
    "deep sample --mnist-labels": ["--first-case", "1", "--mnist-images", "<images>"],
    "deep train --unsupervised-layers": ["--first-unsupervised", "5"],
    "deep train --first-unsupervised": ["--unsupervised-layers", "3"],
    "deep train --last-unsupervised": ["--unsupervised-layers", "3", "--first-unsupervised", "5"],
    "deep train --supervised-layers": ["--first-supervised", "5"],
    "deep train --first-supervised": ["--supervised-layers", "3"],
    "deep train --last-supervised": ["--supervised-layers", "3", "--first-supervised", "5"],
    **{f"{c} --workers": ["--permutations", "2"] for c in ("run", "backtest")},
    # the permutation test re-runs the report's EA on the report's candles: the sample up to 2017-07-01
    **{f"robustness {o}": ["--permutations", "2", "--to", "2017-07-01"] for o in PERMUTATION_OPTIONS},
}
# Options that name the data themselves: the base arguments kept (the model file, not the table), and
# without the table's column choices (TABLE_COLUMNS, refused with any other data).
TABLE_COLUMNS = ("--inputs", "--targets")
OWN_DATA = {
    **dict.fromkeys(
        (
            "deep train --mnist-images",
            "deep train --mnist-labels",
            "deep train --candles",
            "deep train --depth",
        ),
        0,
    ),
    **{
        f"deep {c} --{o}": 1 for c in ("test", "analyze") for o in ("mnist-images", "mnist-labels", "candles")
    },
}
KEY_VALUE = ("--param", "--set", "--opt")  # NAME=VALUE options: the error may name the NAME

# Known failures in parts changed elsewhere at the same time: {name: ({option: failing values, or "*" for
# all}, why)}. The marks are strict: each must go once the change that fixes it is merged. Empty: every
# value of the table is refused as it should be.
PENDING: dict[str, tuple[dict[str, tuple[str, ...] | str], str]] = {}
SLOW_FAILURES: set[str] = set()  # pending cases that run until a time limit: stopped at 3 s


def commands() -> Iterator[tuple[str, object]]:
    """(name, click command) of every leaf command of the app."""

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), command

    yield from walk(typer.main.get_command(app), [])


def key(param) -> str:
    return f"<{param.name}>" if param.param_type_name == "argument" else param.opts[0]


def entry(command: str, param) -> tuple[str, ...] | None:
    """The bad values of ``param`` of ``command`` (None: the table has no entry for it)."""
    name_of = key(param)
    for name in (f"{command} {name_of}", name_of):
        if name in BAD:
            return BAD[name]
    return None


@dataclass(frozen=True)
class Case:
    command: str
    key: str  # "--option" or "<argument>"
    value: str
    names: tuple[str, ...]  # the option's flags, or the argument's name
    position: int | None  # an argument's position, or None for an option

    @property
    def id(self) -> str:
        return f"{self.command} {self.key}={self.value!r}"

    def argv(self, files: dict[str, str]) -> list[str]:
        full = f"{self.command} {self.key}"
        arguments, options = BASE[self.command]
        if full in OWN_DATA:
            arguments = arguments[: OWN_DATA[full]]
            options = _without(options, TABLE_COLUMNS)
        options = [*options, *WITH.get(full, WITH.get(self.key, []))]
        if self.position is None:
            options = [*options, self.key, self.value]
        else:
            arguments = [*arguments[: self.position], self.value, *arguments[self.position + 1 :]]
        return [*self.command.split(), *(fill(a, files) for a in (*arguments, *options))]

    def named(self, line: str, files: dict[str, str]) -> bool:
        """Whether the error line names the option (or argument), its NAME=..., or the value given."""
        value = fill(self.value, files)
        if any(name in line for name in self.names):
            return True
        if self.key in KEY_VALUE and "=" in value and value.partition("=")[0].strip() in line:
            return True
        return bool(value.strip()) and (repr(value) in line or (value != self.value and value in line))


def _without(options: list[str], names: tuple[str, ...]) -> list[str]:
    """``options`` (flag, value, flag, value ...) without the named ones and their values."""
    pairs = zip(options[::2], options[1::2], strict=True)
    return [item for flag, value in pairs if flag not in names for item in (flag, value)]


def fill(text: str, files: dict[str, str]) -> str:
    for name, path in files.items():
        text = text.replace(f"<{name}>", path)
    return text


def cases() -> Iterator[Case]:
    for command, cmd in commands():
        position = 0
        for param in cmd.params:
            is_arg = param.param_type_name == "argument"
            names = (f"'{param.name}'", param.name.upper()) if is_arg else tuple(param.opts)
            for value in entry(command, param) or ():
                yield Case(command, key(param), value, names, position if is_arg else None)
            position += is_arg


def pending(case: Case) -> str | None:
    """Why ``case`` is known to fail elsewhere, or None."""
    for table, reason in PENDING.values():
        values = table.get(f"{case.command} {case.key}", ())
        if values == "*" or case.value in values:
            return reason
    return None


def prepare_files(root: Path) -> dict[str, str]:
    """The files the cases name, in ``root``: good ones the base commands read and bad ones to try."""
    from datafeeds import load_candles, write_mt5_csv

    (root / "dir").mkdir()
    (root / "dir.py").mkdir()
    (root / "file").write_text("a file that is not a folder\n")
    fifo = root / "fifo.csv"
    if hasattr(os, "mkfifo"):  # a reader that opens it waits for a writer that never comes
        os.mkfifo(fifo)
    (root / "notes.txt").write_text("not data of any kind: a shopping list\neggs\n")
    (root / "broken.py").write_text("def broken(:\n")
    (root / "bad.set").write_text("threshold=0.5\ndepth=20||10||0||30||Y\n")  # step 0 on line 2
    (root / "bad.toml").write_text('seed = 1\nforwrad = "1/3"\n')  # a misspelt option
    (root / "bad_table.toml").write_text("[nosuch]\nseed = 1\n")  # a table of no command
    (root / "bad_symbols.toml").write_text('[EURUSD]\nswap_mode = "reopen_bid"\n')  # not modelled
    (root / "eas.py").write_text(
        "from strategies import ExpertAdvisor\n\n\nclass Mine(ExpertAdvisor):\n    pass\n"
    )
    candles = write_mt5_csv(load_candles(end="2017-05-15"), root / "EURUSD_H1.csv")
    lines = candles.read_text().splitlines()
    lines[5] += "\t1"  # one extra field on line 6
    (root / "bad_EURUSD_H1.csv").write_text("\n".join(lines) + "\n")
    ticks = ["<DATE>\t<TIME>\t<BID>\t<ASK>\t<LAST>\t<VOLUME>\t<FLAGS>"]
    ticks += [f"2017.04.19\t09:00:{s:02d}.000\t1.07{s:02d}\t1.07{s + 1:02d}\t\t\t6" for s in range(10)]
    ticks[4] += "\t7"  # one extra field on line 5
    (root / "EURUSD_ticks.csv").write_text("\n".join(ticks) + "\n")
    rng = np.random.default_rng(0)
    stamps = np.arange("2020-01-01T00", "2020-01-15T00", dtype="datetime64[h]")
    values = rng.normal(size=(len(stamps), 3))
    rows = ["date,A,B,OT"]
    rows += [
        f"{str(t).replace('T', ' ')}:00:00,{a:.4f},{b:.4f},{c:.4f}"
        for t, (a, b, c) in zip(stamps, values, strict=True)
    ]
    (root / "series.csv").write_text("\n".join(rows) + "\n")
    (root / "bad_series.csv").write_text("\n".join([*rows[:5], rows[5] + ",9", *rows[6:]]) + "\n")
    table = rng.uniform(-1, 1, size=(80, 5))
    (root / "table.csv").write_text("A,B,C,D,E\n" + "\n".join(",".join(f"{v:.4f}" for v in r) for r in table))
    images = (rng.uniform(size=(20, 4, 4)) < 0.3).astype(np.uint8) * 255
    (root / "images").write_bytes(struct.pack(">4i", 2051, 20, 4, 4) + images.tobytes())
    (root / "labels").write_bytes(
        struct.pack(">2i", 2049, 20) + rng.integers(0, 10, 20).astype(np.uint8).tobytes()
    )
    model = root / "model.dbn"
    code, err = invoke(["deep", "train", str(root / "table.csv"), "--targets", "E", "--layers", "3",
                         "--epochs", "2", "--tries", "2", "--anneal", "2", "--sup-iter", "5", "--backend",
                         "numpy", "--model", str(model), "--log", str(root / "DEEP.LOG")])  # fmt: skip
    assert code == 0, err
    report = root / "report"  # a FractalEA run with its model: what robustness and export read
    code, err = invoke(["backtest", "FractalEA", "-p", "hidden=8", "--epochs", "2", "--backend", "numpy",
                        "--to", "2017-07-01", "--monte-carlo", "20", "--bootstrap", "20", "--no-progress",
                        "--out", str(report)])  # fmt: skip
    assert code == 0, err
    return {
        "missing": str(root / "missing.csv"),
        "fifo": str(fifo if fifo.exists() else root / "missing.csv"),
        "dir": str(root / "dir"),
        "file": str(root / "file"),
        "foreign": str(root / "notes.txt"),
        "broken-ea": str(root / "broken.py"),
        "eas": str(root / "eas.py"),
        "candles": str(candles),
        "bad-candles": str(root / "bad_EURUSD_H1.csv"),
        "bad-ticks": str(root / "EURUSD_ticks.csv"),
        "bad-set": str(root / "bad.set"),
        "bad-config": str(root / "bad.toml"),
        "bad-config-table": str(root / "bad_table.toml"),
        "bad-symbols": str(root / "bad_symbols.toml"),
        "series": str(root / "series.csv"),
        "bad-series": str(root / "bad_series.csv"),
        "table": str(root / "table.csv"),
        "images": str(root / "images"),
        "labels": str(root / "labels"),
        "model": str(model),
        "report": str(report),
    }


def invoke(argv: list[str]) -> tuple[int, str]:
    """The command line's exit status and its output (stdout and stderr together), in-process."""
    with CliRunner().isolation() as (out, err, _):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        text = out.getvalue().decode() + err.getvalue().decode()
    return code, text


class Reached(BaseException):
    """The case got past every check into the command's work: the bad value was accepted."""


def stop(what: str):
    """A stand-in for a command's work that says it was reached."""

    def halt(*args, **kwargs):
        raise Reached(what)

    return halt


def install_stops(patch) -> None:
    """Where each command's work starts: an EA's first study (its parameters were taken in ``on_init``),
    the optimisation's workers, a network's or a deep belief net's training, the live session."""
    import backtests.optimize.api
    import backtests.optimize.walkforward
    import backtests.replay
    import backtests.robustness.analysis
    import neuronet.commands.live
    import nn.dbn
    import strategies.export
    import strategies.forecasting

    hook = backtests.replay.call_hook

    def until_study(ea, name, *args, **kwargs):
        if name == "on_study":
            raise Reached("the EA started to study")
        return hook(ea, name, *args, **kwargs)

    patch(backtests.replay, "call_hook", until_study)
    patch(backtests.optimize.api, "session", stop("the optimisation started its workers"))
    patch(backtests.optimize.walkforward, "session", stop("the walk-forward analysis started its workers"))
    patch(strategies.forecasting, "train_forecaster", stop("the forecaster trained"))
    patch(nn.dbn, "train_dbn", stop("the deep belief net trained"))
    patch(strategies.export, "_build", stop("the export built its graph"))
    for work in ("session", "monte_carlo", "permutation_test", "prediction_robustness"):
        patch(backtests.robustness.analysis, work, stop(f"the robustness analysis started ({work})"))
    patch(neuronet.commands.live.LiveRunner, "begin", stop("the live session reached the terminal"))
    patch(neuronet.commands.live.MultiLiveRunner, "begin", stop("the live session reached the terminal"))
