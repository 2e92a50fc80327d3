"""``neuronet optimize`` with a multi-symbol EA, as a user runs it: the symbols come from the same options
as ``neuronet backtest`` (the EA's own, ``--symbols``, ``--symbols-file``, ``--m1-csv SYMBOL=FILE``), and
a pass gives the figures of the backtest with its parameters. Real subprocesses, real files."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from cli_inprocess import cli

SYNTHETIC = ("--source", "synthetic", "-o", "bars=1200")
BASKET = ("--symbols", "EURUSD,GBPUSD,EURGBP", "--symbols-file", "symbols.toml")


def neuronet(*args, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def symbols_file(tmp_path):
    # EURGBP by 0.05 lots: the basket's hedge legs of a few hundredths are rounded to the file's step or
    # refused below its minimum, so the file changes the figures
    (tmp_path / "symbols.toml").write_text("[EURGBP]\nvolume_min = 0.05\nvolume_step = 0.05\n")
    return tmp_path / "symbols.toml"


def test_a_pass_of_a_multi_symbol_optimisation_is_the_backtest_of_its_parameters(tmp_path, symbols_file):
    opt = neuronet(
        "optimize", "BasketSpreadEA", "-p", "entry=1.5,2.0", "--set", "window=60", *SYNTHETIC, *BASKET,
        "--workers", "2", "--out", "opt", "--no-progress", cwd=tmp_path,  # the EA of --symbols crosses over
    )  # fmt: skip
    assert opt.returncode == 0, opt.stderr
    assert "BasketSpreadEA trades EURUSD, GBPUSD, EURGBP on one account" in opt.stdout
    passes = pd.read_csv(tmp_path / "opt" / "results.csv").set_index("entry")
    for entry in (2.0,):
        bt = neuronet(
            "backtest", "BasketSpreadEA", "-p", f"entry={entry}", "-p", "window=60", *SYNTHETIC, *BASKET,
            "--forward", "none", "--monte-carlo", "0", "--bootstrap", "0", "--out", f"bt{entry}",
            cwd=tmp_path,
        )  # fmt: skip
        assert bt.returncode == 0, bt.stderr
        doc = json.loads((tmp_path / f"bt{entry}" / "report.json").read_text())
        stats = doc["stats"]
        assert passes.loc[entry, "total_trades"] == stats["total_trades"] > 0
        balance = 10_000 + stats["total_net_profit"]
        assert passes.loc[entry, "final_balance"] == pytest.approx(balance, abs=0.005)
        assert set(doc["data"]["symbols"]) >= {"EURUSD", "GBPUSD", "EURGBP"}
    without = neuronet(
        "optimize", "BasketSpreadEA", "-p", "entry=1.5,2.0", "--set", "window=60", *SYNTHETIC,
        "--symbols", "EURUSD,GBPUSD,EURGBP", "--workers", "0", "--out", "plain", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert without.returncode == 0, without.stderr
    plain = pd.read_csv(tmp_path / "plain" / "results.csv").set_index("entry")
    assert not plain["final_balance"].equals(passes["final_balance"])  # the file's volumes were used


@pytest.mark.slow
def test_walk_forward_of_a_multi_symbol_ea_on_every_symbols_minutes(tmp_path):
    res = neuronet(
        "optimize", "TrendFilterEA", "-p", "hourly=12,24", "--walk-forward", "600,300", *SYNTHETIC,
        "--model", "ohlc1m", "--workers", "0", "--out", "wf", "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "TrendFilterEA trades EURUSD, GBPUSD, USDJPY on one account" in res.stdout
    windows = pd.read_csv(tmp_path / "wf" / "walk_forward.csv")
    assert len(windows) == 2 and windows["oos_net_profit"].notna().all()


def test_m1_files_that_are_not_the_bars_minutes_are_refused_naming_the_symbol_the_file_and_the_row(tmp_path):
    """--m1-csv SYMBOL=FILE reaches the run; minutes of another feed than the bars are one line."""
    for symbol, seed in (("EURUSD", 1), ("USDJPY", 2)):
        made = neuronet(
            "data", "export", symbol, "M1", "--source", "synthetic", "-o", f"seed={seed}", "--from",
            "2020-01-06", "--to", "2020-02-01", "--out", f"{symbol}_m1.csv", cwd=tmp_path,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
    res = neuronet(
        "optimize", "TrendFilterEA", "-p", "hourly=12,24", "--symbols", "EURUSD,USDJPY", "--source",
        "synthetic", "--from", "2020-01-06", "--to", "2020-02-01", "--model", "ohlc1m", "--m1-csv",
        "EURUSD=EURUSD_m1.csv", "--m1-csv", "USDJPY=USDJPY_m1.csv", "--workers", "0", "--out", "o",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    # the synthetic bars are not built from these files' minutes: refused, naming the symbol and the file
    assert res.returncode == 2
    assert "EURUSD_m1.csv: row " in res.stderr and "do not fit the EURUSD candles" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "extra, line",
    [
        (["--m1-csv", "eu.csv"], "--m1-csv eu.csv: with several symbols give SYMBOL=FILE"),
        (["--m1-csv", "GBPJPY=gj.csv"], "--m1-csv GBPJPY=gj.csv: GBPJPY is not a symbol of this run"),
        (
            ["--model", "ticks", "--ticks-csv", "GBPJPY=gj.csv"],
            "--ticks-csv GBPJPY=gj.csv: GBPJPY is not a symbol of this run",
        ),
        (["--symbols", "EURUSD,EURUSD"], "--symbols 'EURUSD,EURUSD': a symbol is named twice"),
        (["--symbol", "EURUSD", "--symbols", "EURUSD,GBPUSD"], "give --symbol or --symbols, not both"),
        (["--symbols", "EURUSD,NOSUCH"], "no specification for symbol 'NOSUCH'"),
        (["--symbols-file", "nosuch.toml"], "nosuch.toml"),
    ],
)
def test_bad_multi_symbol_options_of_optimize_are_one_line_and_write_nothing(
    tmp_path, monkeypatch, capsys, extra, line
):
    monkeypatch.chdir(tmp_path)
    args = ["optimize", "TrendFilterEA", "-p", "hourly=12,24", *SYNTHETIC, "--model", "ohlc1m"]
    assert cli(*args, *extra, "--out", "r") == 2
    err = capsys.readouterr().err
    assert line in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()  # the refused run leaves no folder behind


@pytest.mark.parametrize("command", ["backtest", "optimize"])
def test_a_symbols_file_with_a_swap_mode_not_modelled_names_the_file_the_symbol_and_the_field(
    tmp_path, monkeypatch, capsys, command
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[USDJPY]\nswap_long = -3\nswap_mode = "reopen_bid"\n')
    space = ["-p", "hourly=12,24"] if command == "optimize" else []
    assert cli(command, "TrendFilterEA", *space, *SYNTHETIC, "--symbols-file", "s.toml", "--out", "r") == 2
    err = capsys.readouterr().err
    assert "s.toml: symbol USDJPY: swap_mode='reopen_bid': one of disabled, points" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
