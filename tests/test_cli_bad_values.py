"""Every option of every command, with each bad value that applies: one line ``error: ...`` that names the
option, exit status 2, no traceback, and nothing written.

The commands and their options are read from the Typer app itself, so an option added without an entry in
``BAD`` fails ``test_every_option_has_an_entry`` by name. Each case runs in-process (Typer's ``CliRunner``
streams) in an empty working folder, with the expensive work (a backtest's replay, an optimisation, a
training run, a live session) replaced by a stop: a bad value must be refused before it, and a case that
reaches it was accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_table import (
    BAD,
    BASE,
    HUGE,
    SLOW_FAILURES,
    Reached,
    cases,
    commands,
    entry,
    fill,
    install_stops,
    invoke,
    key,
    pending,
    prepare_files,
)
from test_datafeeds.conftest import mt5_server  # noqa: F401 - the simulated terminal's server


def test_every_option_has_an_entry():
    """A new option needs its bad values here (or FLAG): none is left untried by accident."""
    missing = [f"{c} {key(p)}" for c, cmd in commands() for p in cmd.params if entry(c, p) is None]
    assert not missing, f"options without bad values in BAD: {', '.join(missing)}"
    assert set(BASE) == {c for c, _ in commands()}, "every command needs its accepted run in BASE"


def _params() -> list:
    out = []
    for case in cases():
        reason = pending(case)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        if case.id in SLOW_FAILURES:
            marks.append(pytest.mark.timeout(3))
        elif case.value == "<fifo>":  # a reader that opened it would wait for ever: a hang is a failure
            marks.append(pytest.mark.timeout(30))
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


# -- the files the cases read -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    return prepare_files(tmp_path_factory.mktemp("inputs"))


@pytest.fixture
def stops(monkeypatch) -> None:
    """The work of each command, replaced by a stop that says the value was accepted."""
    install_stops(monkeypatch.setattr)


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.parametrize("case", _params())
def test_a_bad_value_is_one_line_naming_the_option(case, files, stops, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("NEURONET_CACHE", str(work / "cache"))
    inputs = Path(files["dir"]).parent
    before = _tree(inputs)
    try:
        code, text = invoke(case.argv(files))
    except Reached as exc:
        pytest.fail(f"accepted: {exc}")
    lines = text.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), f"status {code}:\n{text}"
    assert "Traceback" not in text
    assert case.named(lines[0], files), f"names neither {' nor '.join(case.names)} nor the value: {lines[0]}"
    assert not list(work.iterdir()), f"wrote {sorted(p.name for p in work.iterdir())}"
    assert _tree(inputs) == before, "changed the input files"


# -- the defects the table found, each by name (each failed before its fix) -------------------------------


@pytest.fixture
def empty_folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.parametrize(
    "command", [["backtest", "SmaCrossEA"], ["optimize", "SmaCrossEA", "-p", "fast=5,6"]]
)
def test_a_negative_deposit_is_a_bad_option_not_an_internal_error(command, empty_folder):
    code, text = invoke([*command, "--deposit", "-5"])
    assert (code, text) == (
        2,
        "error: invalid account setting deposit=-5.0 (--deposit): must be a finite amount > 0\n",
    )
    assert not list(empty_folder.iterdir())


def test_an_unknown_backend_parameter_is_a_bad_parameter_not_the_eas_failure(empty_folder):
    code, text = invoke(["backtest", "FractalEA", "-p", "backend=cuda"])
    assert code == 2 and text == (
        "error: FractalEA parameter 'backend': unknown backend 'cuda': expected auto, numpy, opencl or "
        "opencl:<device>\n"
    )
    assert not list(empty_folder.iterdir())


def test_an_unknown_backend_parameter_is_refused_in_python_before_the_first_bar():
    from backtests import Backtest
    from datafeeds import load_candles
    from strategies import EAError, FractalEA

    with pytest.raises(EAError, match="parameter 'backend': unknown backend 'cuda'"):
        Backtest(load_candles(end="2017-06-01"), FractalEA).run(backend="cuda")


def test_a_network_setting_the_nn_library_refuses_is_the_users_error_before_training(empty_folder):
    code, text = invoke(["run", "-p", "lr=nan"])
    assert (code, text) == (2, "error: adam lr must be a finite number >= 0, got nan\n")
    assert not list(empty_folder.iterdir())  # the report folder made for the run is gone again


def test_a_scheduler_address_without_a_port_is_a_bad_option(empty_folder):
    code, text = invoke(["optimize", "SmaCrossEA", "-p", "fast=5,6", "--scheduler", "garbage"])
    assert (code, text) == (
        2,
        "error: --scheduler 'garbage': not a Dask scheduler address; give tcp://HOST:PORT\n",
    )
    assert not list(empty_folder.iterdir())  # refused before the data was read and the report folder made


def test_a_tick_line_with_an_extra_field_names_the_file_and_line(files, empty_folder):
    ticks = files["bad-ticks"]
    code, text = invoke(["backtest", "SmaCrossEA", "--model", "ticks", "--ticks-csv", ticks])
    assert (code, text) == (2, f"error: {ticks}: line 5: 8 tab-separated fields where the header names 7\n")


@pytest.mark.parametrize("option", ["--ticks-csv", "--m1-csv"])
def test_a_bad_file_of_one_symbol_of_several_is_one_line_naming_it(option, files, stops, empty_folder):
    """The multi-symbol route of --ticks-csv / --m1-csv (SYMBOL=FILE): each bad file of the table, given
    for the second symbol, is refused in one line that names the option or the file, and nothing is
    written."""
    model = "ticks" if option == "--ticks-csv" else "ohlc1m"
    base = ["backtest", "TrendFilterEA", "--source", "synthetic", "-o", "bars=50", "--model", model]
    for value in BAD[option]:
        given = fill(value, files)
        code, text = invoke([*base, option, f"GBPUSD={given}", "--out", "r"])
        lines = text.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), f"{value}: {text}"
        assert option in lines[0] or (given.strip() and given in lines[0]), f"{value}: {lines[0]}"
        assert not list(empty_folder.iterdir()), value


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["backtest", "SmaCrossEA", "--deposit", "abc"],
         "error: Invalid value for '--deposit': Input should be a valid number, unable to parse string as a "
         "number (neuronet backtest --help)"),
        (["data", "show", "--bars", "-1"],
         "error: Invalid value for '--bars' / '-n': Input should be greater than or equal to 0 "
         "(neuronet data show --help)"),
        (["backtest"], "error: Missing argument 'ea'. (neuronet backtest --help)"),
        (["nosuch"], "error: No such command 'nosuch'. (neuronet --help)"),
    ],
)  # fmt: skip
def test_a_usage_error_of_the_command_line_framework_is_one_line(argv, line, empty_folder):
    assert invoke(argv) == (2, line + "\n")


def test_a_run_refused_after_its_folders_were_made_leaves_none_behind(empty_folder):
    """FractalEA refuses hidden=0 in on_init: after the data was read and the report folder made."""
    code, text = invoke(["run", "-p", "hidden=0", "--out", "a/b/report"])
    assert (code, text) == (2, "error: FractalEA hidden widths must be positive, got '0'\n")
    code, text = invoke(["run", "-p", "hidden=0"])  # the default reports/FractalEA-EURUSD-H1-<time>/
    assert code == 2 and not list(empty_folder.iterdir())


@pytest.mark.parametrize("journal", ["<missing>", "<dir>", "", "<foreign>"])
def test_live_report_refuses_a_journal_that_is_not_one(journal, files, empty_folder):
    code, text = invoke(["live", "report", fill(journal, files)])
    lines = text.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "journal" in lines[0].lower()
    assert not list(empty_folder.iterdir())  # no empty reports/<journal>/ folder


@pytest.mark.parametrize(
    "opt",
    ["bars=-5", "bars=abc", "bars=1.5", f"bars={HUGE}", "seed=-1", "seed=1.5", "spread=nan", "spread=-3",
     "annual_vol=nan", "annual_vol=0", "annual_vol=inf", "clock=garbage", "nosuch=1"],
)  # fmt: skip
def test_a_bad_option_of_the_synthetic_source_is_one_line_naming_it(opt, empty_folder):
    """The source options (``-o``) of a source that takes them, beyond the sample's none."""
    code, text = invoke(["data", "show", "--source", "synthetic", "-o", opt])
    lines = text.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), text
    assert opt.partition("=")[0] in lines[0]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["backtest", "SmaCrossEA", "-p", "fast=5", "-p", "fast=6"],
         "error: --param fast=...: given twice; give each parameter once"),
        (["backtest", "FractalEA", "--epochs", "3", "-p", "epochs=4"],
         "error: --param epochs=...: --epochs gives it too; give each parameter once"),
        (["optimize", "SmaCrossEA", "-p", "fast=5,6", "--set", "slow=30", "--set", "slow=40"],
         "error: --set slow=...: given twice; give each parameter once"),
        (["backtest", "SmaCrossEA", "--walk-forward", "2000,500", "--forward", "1/2"],
         "error: give --forward or --walk-forward, not both"),
    ],
)  # fmt: skip
def test_a_value_that_another_would_silently_override_is_refused(argv, line, empty_folder):
    """The second of two values for one parameter used to win unsaid (and --forward was dropped beside
    --walk-forward): the run was not the one asked for."""
    assert invoke(argv) == (2, line + "\n")
    assert not list(empty_folder.iterdir())


@pytest.mark.parametrize(
    "param",
    ["d_model=0", "n_heads=3", "dropout=1.5", "lr=nan", "seq_len=0", "pred_len=0", "model=nosuch", "layers=0",
     "batch_size=0", "epochs=-1", "lots=-1", "cost_multiple=nan", "horizon=99", "channels=nosuch"],
)  # fmt: skip
def test_a_forecast_ea_setting_out_of_range_is_refused_before_it_trains(param, stops, empty_folder):
    """These reached the network's layers inside on_study: an EA failure, after the run was announced."""
    code, text = invoke(["backtest", "ForecastEA", "-p", param, "--backend", "numpy"])
    lines = text.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ForecastEA "), text
    assert param.partition("=")[0] in lines[0]
    assert not list(empty_folder.iterdir())


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["deep", "train", "", "--targets", "E"], "'data'"),
        (["deep", "train", "--mnist-images", "", "--mnist-labels", "labels"], "'--mnist-images'"),
        (["deep", "sample", "model.dbn", "--image", ""], "'--image'"),
        (["robustness", ""], "'report'"),
        (["robustness", "rep", "--ea", ""], "'--ea'"),
        (["export", "", "--out", "x"], "'source'"),
        (["export", "rep", "--out", ""], "'--out'"),
        (["optimize", "SmaCrossEA", "-p", "fast=5,6", "--store", ""], "'--store'"),
    ],
)
def test_an_empty_value_is_refused_by_name_not_taken_as_the_current_folder_or_the_default(
    argv, name, empty_folder
):
    """An empty file name reached the readers as "." (``deep train ''``: "data file .: is a folder"), an
    empty ``--out`` of export or robustness meant the current folder, and an empty ``--ea``, ``--image`` or
    ``--store`` the default, unsaid."""
    code, text = invoke(argv)
    assert code == 2 and text.startswith(f"error: Invalid value for {name}: an empty "), text
    assert text.count("\n") == 1 and not list(empty_folder.iterdir())


def test_a_foreign_study_store_is_refused_before_the_data_is_read(files, empty_folder):
    """It was refused only once the data was read, the run announced and the workers started."""
    code, text = invoke(["optimize", "SmaCrossEA", "-p", "fast=5,6", "--store", files["foreign"]])
    assert (code, text) == (
        2,
        f"error: cannot open the study store {files['foreign']}: file is not a database\n",
    )
    assert not list(empty_folder.iterdir())


@pytest.mark.parametrize(
    "command",
    [
        ["backtest", "SmaCrossEA"],
        ["optimize", "SmaCrossEA", "-p", "fast=5,6"],
        ["data", "show", "EURUSD", "H1"],
    ],
)
def test_a_start_after_the_end_names_from_and_to(command, empty_folder):
    """The source's "start 2017-07-01 00:00:00+00:00 must come before end ..." named no option."""
    code, text = invoke([*command, "--from", "2017-07-01", "--to", "2017-06-01"])
    assert (code, text) == (2, "error: --from 2017-07-01 must come before --to 2017-06-01\n")


def test_export_refuses_an_out_that_is_a_file_before_reading_the_model(files, empty_folder):
    """Checked after the model was read, its graph built and checked against Python (seconds)."""
    code, text = invoke(["export", files["missing"], "--out", files["file"]])
    assert (code, text) == (
        2,
        f"error: --out {files['file']}: a file of that name exists; give a folder path\n",
    )


def test_a_generative_chain_beyond_32_bits_is_refused_at_once(files, empty_folder):
    """``deep sample --chain 1e20`` ran the Gibbs chain until it was stopped."""
    code, text = invoke(["deep", "sample", files["model"], "--backend", "numpy", "--chain", HUGE])
    assert (code, text) == (2, f"error: --chain {HUGE}: must be 0-2147483647\n")


_MULTI_EAS = """
from strategies.trend_filter import TrendFilterEA


class Odd(TrendFilterEA):
    symbols = ("EURUSD", "XAUEUR")


class NoDaily(TrendFilterEA):
    symbols = ("EURUSD", "GBPUSD")


class Seven(TrendFilterEA):
    timeframes = ("H1", "H7")
"""
_LIMITS = ["--max-lots", "1", "--max-positions", "1", "--max-daily-loss", "100"]


@pytest.mark.parametrize(
    ("ea", "extra", "line"),
    [
        ("eas.py:Odd", [], "error: Odd trades XAUEUR: the terminal has no symbol 'XAUEUR'"),
        ("eas.py:NoDaily", [],
         "error: NoDaily reads GBPUSD D1: the terminal at 127.0.0.1:{port} has no GBPUSD D1 history"),
        ("eas.py:Seven", [], "error: Seven.timeframes: "),
        ("TrendFilterEA", ["--live", *_LIMITS, "--allow-symbol", "EURUSD", "--allow-symbol", "USDJPY"],
         "error: --live: GBPUSD is not among --allow-symbol EURUSD, USDJPY (TrendFilterEA trades EURUSD, "
         "GBPUSD, USDJPY); nothing was sent"),
        ("TrendFilterEA", ["--symbol", "GBPUSD"],
         "error: --symbol GBPUSD: TrendFilterEA declares its own main chart EURUSD H1"),
        ("TrendFilterEA", ["--max-account-positions", "2"],
         "error: --max-account-positions is a limit of --live; a paper run has none"),
    ],
)  # fmt: skip
def test_a_multi_symbol_live_run_refuses_what_it_cannot_trade_before_anything_is_sent(
    mt5_server,  # noqa: F811 - the imported fixture
    ea,
    extra,
    line,
    empty_folder,
):
    """An EA symbol the terminal does not know, a timeframe it cannot give (no history of it, or none
    MetaTrader has), a symbol not in --allow-symbol: one line each, no journal, no order."""
    import rpyc

    (empty_folder / "eas.py").write_text(_MULTI_EAS)
    control = rpyc.classic.connect(*mt5_server)
    sim = control.modules.MetaTrader5.SIM
    sim.reset()
    sim.configure(no_history=(("GBPUSD", 16408),))  # TIMEFRAME_D1
    try:
        argv = ["live", ea, "-o", f"port={mt5_server[1]}", "--poll", "0", "--max-bars", "1", *extra]
        code, text = invoke(argv)
        assert sim.call_count("order_send") == 0
    finally:
        sim.reset()
        control.close()
    lines = text.strip().splitlines()
    assert code == 2 and lines[-1].startswith(line.format(port=mt5_server[1])), text
    journals = empty_folder / "journals"
    assert all(p.stat().st_size == 0 for p in journals.glob("*.jsonl"))  # nothing journaled
