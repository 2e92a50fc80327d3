"""``neuronet run`` and ``neuronet backtest`` as a user runs them: real subprocesses, real files."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest


def neuronet(*args, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_builtin_ea_by_name_writes_a_report(tmp_path):
    out = tmp_path / "rep"
    res = neuronet(
        "backtest",
        "sma",
        "--spread",
        "10",
        "--commission",
        "3.5",
        "--to",
        "2017-09-01",
        "-p",
        "fast=5",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "report: " in res.stdout and "trades" in res.stdout
    doc = json.loads((out / "report.json").read_text())
    assert doc["ea"]["class"] == "SmaCrossEA" and doc["ea"]["params"]["fast"] == 5
    assert doc["account"]["spread"] == 10 and doc["data"]["last"].startswith("2017-08-31")


USER_EA = textwrap.dedent(
    """
    from strategies import ExpertAdvisor

    class Breakout(ExpertAdvisor):
        lookback = 24

        def on_bar(self):
            if len(self.bars) <= self.lookback:
                return
            hi = self.bars.high[-self.lookback - 1 : -1].max()
            if self.bars.close[-1] > hi and self.position <= 0:
                self.close()
                self.buy(0.1, sl_points=200, tp_points=400)

    class Broken(ExpertAdvisor):
        def on_bar(self):
            if len(self.bars) > 4000:
                raise ZeroDivisionError("oops")

    class NotAnEA:
        pass

    class Interrupts(ExpertAdvisor):
        def on_bar(self):
            if len(self.bars) == 4100:
                import os, signal
                os.kill(os.getpid(), signal.SIGINT)
            elif len(self.bars) == 4050:
                self.buy(0.1)
    """
)


@pytest.fixture
def ea_file(tmp_path):
    path = tmp_path / "my_eas.py"
    path.write_text(USER_EA)
    return path


def test_user_ea_from_a_file(tmp_path, ea_file):
    res = neuronet(
        "backtest",
        f"{ea_file}:Breakout",
        "--spread",
        "10",
        "-p",
        "lookback=12",
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["ea"]["class"] == "Breakout" and doc["ea"]["params"]["lookback"] == 12


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing.py:X", "EA file not found: missing.py"),
        ("{file}:NotAnEA", "is not an expert advisor"),
        ("{file}:Nope", "has no class 'Nope'"),
        ("{file}", "defines 3 expert advisors"),
        ("fractl", "did you mean FractalEA"),
        ("{file}:Broken", "Broken.on_bar raised at bar 4001 (2017-12-08 01:00"),
    ],
    ids=["missing-file", "not-an-ea", "no-such-class", "ambiguous-file", "misspelt-builtin", "ea-raises"],
)
def test_bad_input_gives_one_clear_line(tmp_path, ea_file, target, message):
    res = neuronet("backtest", target.format(file=ea_file), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1], res.stderr
    assert "Traceback" not in res.stderr


def test_period_with_too_few_bars(tmp_path):
    res = neuronet(
        "run", "--from", "2017-05-01", "--to", "2017-05-04", "--out", str(tmp_path / "r"), cwd=tmp_path
    )
    assert res.returncode == 2 and "too few bars" in res.stderr and "Traceback" not in res.stderr


def test_misspelt_parameter(tmp_path):
    res = neuronet("backtest", "sma", "-p", "slwo=30", cwd=tmp_path)
    assert res.returncode == 2 and "did you mean 'slow'" in res.stderr


def test_ctrl_c_still_writes_a_report_marked_incomplete(tmp_path, ea_file):
    args = ("backtest", f"{ea_file}:Interrupts", "--forward", "1/3", "--out", str(tmp_path / "r"))
    res = neuronet(*args, cwd=tmp_path)
    assert res.returncode == 130, res.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["complete"] is False and doc["stats"]["total_trades"] == 1
    assert "INCOMPLETE" in res.stderr and res.stderr.rstrip().endswith("Interrupted.")


def test_run_fast_variant(tmp_path):
    res = neuronet(
        "run",
        "--epochs",
        "1",
        "--backend",
        "numpy",
        "--to",
        "2017-07-15",
        "-p",
        "hidden=16",
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "predictions on" in res.stdout and "hit rate" in res.stdout
    # --epochs is the maximum: one epoch, on 80 % of the study rows, then the cap ends training
    assert "kept epoch 1 of 1 (training loss" in res.stdout and "1-epoch maximum reached" in res.stdout
    folder = tmp_path / "r"
    tables = {"trades.csv", "orders.csv", "deals.csv", "rejected.csv"}
    assert {p.name for p in folder.iterdir()} == {"report.html", "report.json", "model.nnz", *tables}
    doc = json.loads((folder / "report.json").read_text())
    assert len(doc["training"]["epochs"]) == 1 and doc["predictions"]["bars"] > 100
    (epoch,) = doc["training"]["epochs"]
    assert epoch["kept"] and epoch["kept_epoch"] == 1 and epoch["val_loss"] > 0 and not epoch["stopped_early"]
    page = (folder / "report.html").read_text()
    assert "Kept epoch 1 of 1 (training loss" in page
    assert "<th>logistic regression</th>" in page and "logistic regression" in res.stdout


@pytest.mark.slow
def test_run_with_defaults(tmp_path):
    res = neuronet("run", "--out", str(tmp_path / "r"), cwd=tmp_path, timeout=1200)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    epochs = doc["training"]["epochs"]
    # early stopping on the validation loss, not the 100-epoch maximum, ends training; the best epoch is kept
    assert doc["complete"] and len(epochs) < 100 and epochs[-1]["stopped_early"]
    kept = epochs[-1]["kept_epoch"]
    assert epochs[kept - 1]["kept"] and epochs[kept - 1]["val_loss"] == min(e["val_loss"] for e in epochs)
    assert "stopped early: validation loss not lower for 5 epochs" in res.stdout
    assert doc["data"]["bars"] == 5000 and doc["periods"]["forward_start"] == 3333


def test_out_path_that_is_a_file_fails_before_any_work(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    res = neuronet("backtest", "sma", "--out", str(taken), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last == f"error: --out {taken}: a file of that name exists; give a folder path"
    assert "trading:" not in res.stdout  # refused before the replay, not after it


_MEANWHILE = """
import os, subprocess
from strategies import SmaCrossEA


class Meanwhile(SmaCrossEA):
    '''SmaCrossEA whose run waits, in on_init, for another whole backtest on the same --out.'''

    def on_init(self):
        subprocess.run(os.environ["MEANWHILE_CMD"].split("\\x1f"), check=True)
        super().on_init()
"""


def test_a_report_another_backtest_wrote_meanwhile_in_the_same_folder_is_not_replaced(tmp_path):
    """Two backtests on one ``--out``, both started while it was empty: the one that finishes last must not
    write over the other's finished report."""
    out = tmp_path / "rep"
    (tmp_path / "meanwhile.py").write_text(_MEANWHILE)
    other = [sys.executable, "-m", "neuronet", "backtest", "sma", "--to", "2017-06-01", "-p", "fast=7",
             "--out", str(out)]  # fmt: skip
    mine = [sys.executable, "-m", "neuronet", "backtest", "meanwhile.py:Meanwhile", "--to", "2017-09-01",
            "--out", str(out)]  # fmt: skip
    env = {**os.environ, "MEANWHILE_CMD": "\x1f".join(other)}
    res = subprocess.run(mine, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    doc = json.loads((out / "report.json").read_text())
    assert doc["ea"]["class"] == "SmaCrossEA" and doc["ea"]["params"]["fast"] == 7  # the other's stands
    assert res.returncode == 2 and "--out" in res.stderr and "--force" in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr


def test_symbols_runs_several_symbols_on_one_account_and_trades_csv_names_them(tmp_path):
    out = tmp_path / "multi"
    done = neuronet(
        "backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=3000", "--symbols", "EURUSD,USDJPY",
        "--out", str(out), "--monte-carlo", "0", "--bootstrap", "0", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "report.json").read_text())
    table = doc["data"]["symbols"]
    assert set(table) == {"EURUSD", "USDJPY"}  # USDJPY converts its own yen: nothing else loaded
    header, *rows = (out / "trades.csv").read_text().splitlines()
    assert header.split(",")[1] == "symbol"
    counts = {s: sum(1 for r in rows if r.split(",")[1] == s) for s in table}
    assert counts == {s: table[s]["trades"] for s in table} and all(counts.values())
    page = (out / "report.html").read_text()
    assert "<h2>Symbols</h2>" in page and "<h3>USDJPY</h3>" in page  # a table, then a chart each


@pytest.mark.parametrize(
    "extra, line",
    [
        (["--m1-csv", "eu.csv"], "--m1-csv eu.csv: with several symbols give SYMBOL=FILE"),
        (["--m1-csv", "GBPJPY=gj.csv"], "--m1-csv GBPJPY=gj.csv: GBPJPY is not a symbol of this run"),
        (["--m1-csv", "EURUSD=a.csv", "--m1-csv", "eurusd=b.csv"], "--m1-csv: EURUSD is given twice"),
        (["--ticks-csv", "EURUSD=eu.csv"], "--ticks-csv is only used with --model ticks"),
        (["--symbols", "EURUSD,EURUSD"], "--symbols 'EURUSD,EURUSD': a symbol is named twice"),
    ],
)
def test_bad_multi_symbol_data_options_are_one_line_and_write_nothing(tmp_path, extra, line):
    args = ["backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=500", "--model", "ohlc1m"]
    done = neuronet(*args, *extra, "--out", "r", cwd=tmp_path)
    assert done.returncode == 2
    assert line in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_multi_symbol_ohlc1m_run_from_the_synthetic_source_works_through_every_minute(tmp_path):
    done = neuronet(
        "backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=1500", "--model", "ohlc1m",
        "--out", "r", "--monte-carlo", "0", "--bootstrap", "0", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["data"]["model"] == "ohlc1m"
    assert set(doc["data"]["m1_quality"]) == {"EURUSD", "GBPUSD", "USDJPY"}
    assert all(q == 100.0 for q in doc["data"]["m1_quality"].values())


@pytest.mark.parametrize(
    "extra, line",
    [
        (["--ticks-csv", "eu.csv"], "--ticks-csv eu.csv: with several symbols give SYMBOL=FILE"),
        (["--ticks-csv", "GBPJPY=gj.csv"], "--ticks-csv GBPJPY=gj.csv: GBPJPY is not a symbol of this run"),
        (
            ["--ticks-csv", "EURUSD=a.csv", "--ticks-csv", "eurusd=b.csv"],
            "--ticks-csv: EURUSD is given twice",
        ),
        (["--m1-csv", "EURUSD=eu.csv"], "--m1-csv is only used with --model ohlc1m"),
    ],
)
def test_bad_multi_symbol_tick_options_are_one_line_and_write_nothing(tmp_path, extra, line):
    args = ["backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=50", "--model", "ticks"]
    done = neuronet(*args, *extra, "--out", "r", cwd=tmp_path)
    assert done.returncode == 2
    assert line in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_multi_symbol_tick_run_from_the_synthetic_source_works_through_every_symbols_ticks(tmp_path):
    done = neuronet(
        "backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=300", "-p", "daily=3", "--model",
        "ticks", "--out", "r", "--monte-carlo", "0", "--bootstrap", "0", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["data"]["model"] == "ticks"
    assert doc["data"]["tick_quality"] == {"EURUSD": 100.0, "GBPUSD": 100.0, "USDJPY": 100.0}
    table = doc["data"]["symbols"]
    assert sum(v["trades"] for v in table.values()) > 0
    # The same run in Python, from the same loader: the same figures (one set of defaults).
    from backtests import Backtest
    from neuronet.commands.symbols import load_symbols
    from strategies.trend_filter import TrendFilterEA

    names = TrendFilterEA.symbols
    frames, ticks = load_symbols(names, "synthetic", "H1", None, None, {"bars": 300}, "USD", "ticks")
    mine = Backtest(frames, TrendFilterEA, model="ticks", ticks=ticks).run(daily=3).data["symbols"]
    assert {s: (table[s]["trades"], table[s]["net_profit"]) for s in names} == {
        s: (mine[s]["trades"], mine[s]["net_profit"]) for s in names
    }


def test_a_tick_file_outside_its_symbols_bars_names_the_symbol_the_file_and_the_row(tmp_path):
    from datafeeds import load_candles
    from datafeeds.tick_csv import write_tick_csv
    from datafeeds.ticks import TickMeta, make_ticks

    # GBPUSD's synthetic bars as the run loads them (the second symbol: seed 1, the run's shock), and four
    # ticks in each (open, high, low, close) that make them up; one tick 500 points above its bar's high.
    bars = load_candles("synthetic", "GBPUSD", "H1", seed=1, bars=30, common_seed=0, correlation=0.5)
    offsets = np.array([0, 600, 1200, 3540]) * 1_000_000_000
    ns = (bars.index.as_unit("ns").asi8[:, None] + offsets).ravel()
    bid = bars[["open", "high", "low", "close"]].to_numpy().ravel().copy()
    bid[41] += 0.005
    write_tick_csv(make_ticks(ns, bid, bid + 0.0001, TickMeta("GBPUSD", 5, "gbp.csv")), tmp_path / "gbp.csv")
    done = neuronet(
        "backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=30", "--symbols", "EURUSD,GBPUSD",
        "--model", "ticks", "--ticks-csv", "GBPUSD=gbp.csv", "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("error: GBPUSD: csv:gbp.csv: row 42 ") and "lies above the high" in line, line
    assert not (tmp_path / "r").exists()


def test_a_symbols_file_changes_a_builtin_symbols_specification(tmp_path):
    (tmp_path / "symbols.toml").write_text("[USDJPY]\nvolume_min = 0.5\nvolume_step = 0.5\n")
    done = neuronet(
        "backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=1500", "--symbols", "EURUSD,USDJPY",
        "--symbols-file", "symbols.toml", "--out", "r", "--monte-carlo", "0", "--bootstrap", "0",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["data"]["symbols"]["USDJPY"]["trades"] == 0  # its 0.1 lots are below the file's 0.5
    assert doc["data"]["symbols"]["EURUSD"]["trades"] > 0
    refused = {(r["symbol"], r["retcode"]) for r in doc["rejected_orders"]["first"]}
    assert refused == {("USDJPY", 10014)}


def test_a_symbol_with_path_characters_never_puts_the_default_report_folder_outside_reports(
    tmp_path, monkeypatch
):
    """``--symbol ../../../../escaped/EURUSD`` on a CSV file named the default folder
    ``reports/SmaCrossEA-../../../../ESCAPED/EURUSD-H1-<time>``: the report was written two folders above
    the working directory. The folder's name keeps the symbol's own characters only."""
    from tests.cli_inprocess import cli

    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert cli("data", "export", "--to", "2017-09-01", "--out", "eu.csv") == 0
    status = cli("backtest", "SmaCrossEA", "--csv", "eu.csv", "--symbol", "../../../../escaped/EURUSD")
    assert status == 0
    assert not [p for p in tmp_path.rglob("*") if "ESCAPED" in p.name.upper() and "reports" not in p.parts]
    (folder,) = (work / "reports").iterdir()
    assert (folder / "report.json").is_file() and "/" not in folder.name
