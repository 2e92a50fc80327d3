"""Options every command shares: one data-option set, one set of defaults, refused options, ``--out``."""

import json

import pytest

from backtests import Backtest
from backtests.progress import EpochProgress
from datafeeds import SOURCES, load_candles
from neuronet.cli import main
from strategies import FractalEA


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [["run"], ["backtest"], ["data", "show"], ["forecast"], ["devices"]])
def test_help_lists_the_registered_sources_and_no_bool_values(capsys, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "240")
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0 and "<bool>" not in out
    if command[0] != "forecast" and command[0] != "devices":
        assert f"Candle source: {', '.join(SOURCES)}." in out
    if command == ["devices"]:
        assert "--backend opencl:<device>" in out  # the one way other commands pick a device


@pytest.mark.parametrize(
    "option", [["--epochs", "3"], ["--batch-size", "8"], ["--backend", "numpy"]], ids=lambda o: o[0]
)
def test_an_option_the_ea_does_not_use_is_refused(capsys, tmp_path, option):
    code, out, err = run(capsys, "backtest", "sma", *option, "--out", str(tmp_path / "r"))
    assert code == 2 and "trading:" not in out
    assert err.strip().splitlines()[-1].startswith(f"error: {option[0]}: SmaCrossEA has no ")


def test_non_empty_out_is_refused_unless_forced(capsys, tmp_path):
    folder = tmp_path / "done"
    folder.mkdir()
    (folder / "report.json").write_text("the finished report")
    code, out, err = run(capsys, "backtest", "sma", "--to", "2017-08-01", "--out", str(folder))
    assert code == 2 and "the folder is not empty" in err and "--force" in err
    assert "SmaCrossEA on" not in out  # refused before the data was read
    assert (folder / "report.json").read_text() == "the finished report"
    code, out, err = run(capsys, "backtest", "sma", "--to", "2017-08-01", "--out", str(folder), "--force")
    assert code == 0, err
    assert json.loads((folder / "report.json").read_text())["complete"] is True


def test_same_ea_same_data_same_result_from_every_entry_point(capsys, tmp_path):
    """run, backtest and Backtest(...) share every default: costs, backend, seed, periods."""
    args = ["--to", "2017-06-01", "--epochs", "1", "-p", "hidden=8"]
    results = []
    for cmd in (["run"], ["backtest", "FractalEA"]):
        folder = tmp_path / cmd[0]
        code, out, err = run(capsys, *cmd, *args, "--out", str(folder))
        assert code == 0, err
        assert "10 points" in err  # the sample has no spread: the documented default applies, and is said
        assert ", on " in out  # the console names the backend that trained the model
        results.append(json.loads((folder / "report.json").read_text()))
    py = Backtest(load_candles(end="2017-06-01"), FractalEA).run(epochs=1, hidden="8")
    a, b = results
    assert a["stats"]["total_trades"] > 0
    for key in ("total_net_profit", "total_trades", "gross_profit"):
        assert a["stats"][key] == b["stats"][key] == py.stats[key]
    assert a["account"] == b["account"] and a["account"]["missing_spread"] == 10


def test_backtest_reads_a_terminal_export_in_broker_time(capsys, tmp_path):
    export = tmp_path / "EURUSD_H1.csv"
    args = ["data", "export", "--broker-tz", "+2/us", "--to", "2017-06-15", "--out", str(export)]
    code, _, err = run(capsys, *args)
    assert code == 0, err
    firsts = {}
    for tz in ("+2/us", None):
        folder = tmp_path / f"r{tz is None}"
        extra = ["--broker-tz", tz] if tz else []
        code, _, err = run(capsys, "backtest", "sma", "--csv", str(export), *extra, "--out", str(folder))
        assert code == 0, err
        firsts[tz] = json.loads((folder / "report.json").read_text())["data"]["first"]
    assert firsts["+2/us"].startswith("2017-04-19 09:00")  # the sample's first bar, in UTC again
    assert firsts[None].startswith("2017-04-19 12:00")  # read as UTC: three hours late (US summer time)


def test_synthetic_data_follows_the_seed(capsys, tmp_path):
    profits = []
    for i, seed in enumerate(("1", "2")):
        folder = tmp_path / f"s{i}"
        code, _, err = run(capsys, "backtest", "sma", "-s", "synthetic", "-o", "bars=1500", "--seed", seed,
                           "--out", str(folder))  # fmt: skip
        assert code == 0, err
        profits.append(json.loads((folder / "report.json").read_text())["stats"]["total_net_profit"])
    assert profits[0] != profits[1]


INTERRUPTING_EA = """
from strategies import ExpertAdvisor

class StopsAtBar(ExpertAdvisor):
    def on_bar(self):
        if len(self.bars) == 4100:
            raise KeyboardInterrupt
"""


def test_ctrl_c_prints_interrupted_and_exits_130(capsys, tmp_path):
    (tmp_path / "ea.py").write_text(INTERRUPTING_EA)
    code, _, err = run(capsys, "backtest", f"{tmp_path / 'ea.py'}:StopsAtBar", "--out", str(tmp_path / "r"))
    assert code == 130 and err.rstrip().endswith("Interrupted.")
    assert json.loads((tmp_path / "r" / "report.json").read_text())["complete"] is False


def test_walk_forward_epoch_bar_never_runs_past_its_total(monkeypatch):
    import tqdm

    bars = []

    class Recorder(tqdm.tqdm):
        def __init__(self, *a, **kw):
            super().__init__(*a, **{**kw, "disable": True})
            bars.append(self)

    monkeypatch.setattr(tqdm, "tqdm", Recorder)
    progress = EpochProgress(True)
    for rnd, epochs in ((1, 10), (1, 10), (2, 10), (3, 10)):
        for _ in range(epochs if rnd > 1 else 5):
            progress.update({"round": rnd, "epochs": 10, "loss": 0.1})
    progress.close()
    assert len(bars) == 3 and all(b.n <= b.total for b in bars)


def test_an_unknown_backend_is_refused_before_any_work(capsys, tmp_path):
    code, out, err = run(capsys, "run", "--backend", "cuda", "--out", str(tmp_path / "r"))
    assert code == 2 and "'--backend': unknown backend 'cuda': expected auto, numpy, opencl or opencl:" in err
    assert not (tmp_path / "r").exists() and "FractalEA on" not in out


@pytest.mark.parametrize(
    ("opt", "use"), [("start=2020-06-01", "--from"), ("end=2021", "--to"), ("symbol=GBPUSD", "SYMBOL")]
)
def test_an_opt_that_names_a_load_parameter_points_to_the_commands_option(capsys, opt, use):
    code, _, err = run(capsys, "data", "show", "--source", "synthetic", "-o", opt)
    assert code == 2 and err.startswith(f"error: --opt {opt.split('=')[0]}=...: ") and use in err


@pytest.mark.parametrize("command", [["backtest", "sma"], ["optimize", "sma", "-p", "fast=5:6"]])
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--deposit", "nan"),
        ("--leverage", "-1"),
        ("--commission", "-0.5"),
        ("--swap-long", "inf"),
        ("--margin-hedged", "-1"),
    ],
)
def test_a_bad_account_option_is_a_one_line_error_naming_it(capsys, tmp_path, command, option, value):
    """The account is built by one builder for every command: a bad value exits 2 naming the option (it
    was an internal error with status 1 before)."""
    code, _, err = run(capsys, *command, option, value, "--out", str(tmp_path / "r"))
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: invalid account setting ") and f"({option}): must be " in line, line
