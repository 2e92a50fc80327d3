"""Data files a user names must be regular files: a FIFO (whose ``open`` blocks until a writer comes),
``/dev/zero`` (an endless read) and a folder are refused at once, in one line naming the path, by every
reader (MetaTrader CSV bars, tick exports, plain tables) and on the command line."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from datafeeds import load_candles
from datafeeds.files import read_csv_file
from datafeeds.tick_csv import read_tick_csv
from neuronet.userfiles import NotAFileError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes and /dev/zero are POSIX")

READERS = {
    "bars": lambda p: load_candles("csv", path=str(p)),
    "ticks": lambda p: read_tick_csv(p),
    "table": lambda p: read_csv_file(p, "table"),
}


def _hostile(tmp_path: Path, kind: str) -> tuple[Path, type, str]:
    if kind == "pipe":
        fifo = tmp_path / "EURUSD_H1.csv"
        os.mkfifo(fifo)
        return fifo, NotAFileError, "is a pipe"
    if kind == "device":
        return Path("/dev/zero"), NotAFileError, "is a character device"
    return tmp_path, IsADirectoryError, "is a folder"


def _returns(call) -> BaseException:
    """The error ``call()`` raises, which it must raise at once (a blocked open never returns)."""
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(30)
    assert outcome, "the reader did not return"
    return outcome[0]


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("kind", ["pipe", "device", "folder"])
def test_every_reader_refuses_what_is_not_a_regular_file(tmp_path, reader, kind):
    path, family, words = _hostile(tmp_path, kind)
    exc = _returns(lambda: READERS[reader](path))
    assert isinstance(exc, family) and words in str(exc), repr(exc)
    assert str(path) in str(exc) and "\n" not in str(exc)


@pytest.mark.parametrize(
    "option", [["--csv"], ["--ticks-csv"], ["--m1-csv"]], ids=["csv", "ticks-csv", "m1-csv"]
)
def test_the_command_line_refuses_a_pipe_in_one_line(tmp_path, capsys, option):
    from neuronet.cli import main

    fifo, _, _ = _hostile(tmp_path, "pipe")
    args = ["backtest", "sma", *option, str(fifo), "--out", str(tmp_path / "out")]
    if option != ["--csv"]:
        args += ["--model", "ticks" if option == ["--ticks-csv"] else "ohlc1m"]

    def call() -> None:
        main(args)

    exc = _returns(call)
    err = capsys.readouterr().err
    assert isinstance(exc, SystemExit) and exc.code == 2, err
    assert len(err.strip().splitlines()) == 1 and "is a pipe" in err and str(fifo) in err
