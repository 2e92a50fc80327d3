"""``--config run.toml``: a command's options from a TOML file, the command line overriding them."""

import json

import pytest
from cli_inprocess import cli

RUN_FILE = """\
ea = "SmaCrossEA"
to = "2017-06-01"
param = ["fast=7", "slow=30"]

[backtest]
spread = 12
forward = "1/3"

[optimize]
workers = 0
"""


def test_a_toml_run_file_gives_the_options_and_the_command_line_overrides_them(tmp_path, capsys):
    run = tmp_path / "run.toml"
    run.write_text(RUN_FILE)
    out = tmp_path / "rep"
    assert cli("backtest", "--config", str(run), "--spread", "15", "--out", str(out)) == 0, (
        capsys.readouterr()
    )
    doc = json.loads((out / "report.json").read_text())
    assert (doc["ea"]["class"], doc["ea"]["params"]["fast"], doc["ea"]["params"]["slow"]) == (
        "SmaCrossEA",
        7,
        30,
    )
    assert doc["account"]["spread"] == 15 and doc["periods"]["forward_rule"] == "forward 1/3"
    assert doc["data"]["last"].startswith("2017-05-31")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('forwrad = "1/3"\n', "forwrad: this command has no such option; did you mean 'forward'?"),
        ("[nosuch]\nseed = 1\n", "[nosuch] is no command"),
        ("seed = [1, 2]\n", "seed: a list is not a value this option takes"),
        ("seed = \n", "not a TOML file"),
    ],
)
def test_a_bad_run_file_is_one_line_naming_it(tmp_path, capsys, text, says):
    run = tmp_path / "run.toml"
    run.write_text(text)
    code = cli("backtest", "sma", "--config", str(run), "--out", str(tmp_path / "r"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--config" in err and str(run) in err, err
    assert says in err and not (tmp_path / "r").exists()


def test_a_bad_value_in_a_run_file_is_checked_as_on_the_command_line(tmp_path, capsys):
    run = tmp_path / "run.toml"
    run.write_text('forward = "garbage"\n')
    assert cli("backtest", "sma", "--config", str(run), "--out", str(tmp_path / "r")) == 2
    err = capsys.readouterr().err.strip()
    assert "forward period 'garbage'" in err and len(err.splitlines()) == 1
