"""MetaTrader .set files on the command line: ``-p @inputs.set`` for a backtest and an optimisation (its
ranges flagged Y searched), the best pass written back as a .set and read again, bad lines refused."""

import codecs
import json

import pandas as pd
from cli_inprocess import cli

from strategies import SmaCrossEA
from strategies.setfile import read_set

TERMINAL = (
    "; saved on 2024.03.01 10:00:00\r\n"
    ";\r\n"
    "fast=7||5||5||15||Y\r\n"
    "slow=30||20||10||30||Y\r\n"
    "sl_points=150||100||50||300||N\r\n"
)


def _utf16(path, text):
    path.write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    return path


def test_backtest_takes_a_terminal_set_file_and_an_option_overrides_it(tmp_path, capsys):
    inputs = _utf16(tmp_path / "sma.set", TERMINAL)
    out = tmp_path / "rep"
    code = cli(
        "backtest", "sma", "--to", "2017-06-01", "-p", f"@{inputs}", "-p", "slow=25", "--out", str(out)
    )
    assert code == 0, capsys.readouterr().err
    params = json.loads((out / "report.json").read_text())["ea"]["params"]
    assert (params["fast"], params["slow"], params["sl_points"]) == (7, 25, 150)
    said = capsys.readouterr().out  # the default forward period, and why
    assert "735 bars, no study, forward 2017-04-19 .. 2017-05-31 (734): every bar (default: Sma" in said


def test_a_bad_set_line_is_one_line_naming_file_line_and_input(tmp_path, capsys):
    bad = tmp_path / "bad.set"
    bad.write_text("fast=10\nslow=30||40||10||20||Y\n")
    code = cli("backtest", "sma", "-p", f"@{bad}", "--out", str(tmp_path / "r"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{bad} line 2 (slow): start 40 lies beyond stop 20" in err
    assert not (tmp_path / "r").exists()


def test_optimise_from_a_set_file_and_read_the_best_pass_back(tmp_path, capsys):
    inputs = _utf16(tmp_path / "sma.set", TERMINAL)
    out = tmp_path / "opt"
    code = cli(
        "optimize", "sma", "-p", f"@{inputs}", "--to", "2017-06-01", "--workers", "0", "--out", str(out)
    )
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(out / "results.csv")
    assert sorted(zip(table["fast"], table["slow"], strict=True)) == [
        (f, s) for f in (5, 10, 15) for s in (20, 30)
    ]
    best = read_set(out / "best.set", SmaCrossEA)  # UTF-16 as the terminal writes it, read back
    assert (out / "best.set").read_bytes().startswith(codecs.BOM_UTF16_LE)
    top = table.iloc[0]
    assert (int(best.values["fast"]), int(best.values["slow"])) == (top["fast"], top["slow"])
    assert float(best.values["sl_points"]) == 150 and best.searched() == {
        "fast": "5:15:5",
        "slow": "20:30:10",
    }
    assert f"-p @{out / 'best.set'}" in capsys.readouterr().out
