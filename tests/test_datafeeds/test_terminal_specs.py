"""Symbol specifications from the terminal: ``TerminalSource.spec`` reads ``symbol_info`` over the real
RPyC bridge of the simulated terminal, a multi-symbol backtest with ``--source mt5`` trades each symbol on
the terminal's conditions (its swaps charged), and a symbol the terminal does not know, or a record no
MetaTrader symbol has, is one line naming it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from datafeeds.symbols import SpecError, spec_from_symbol_info
from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import UnknownSymbolError
from neuronet.cli import main


@pytest.fixture
def source(mt5_server, mt5sim):
    host, port = mt5_server
    with TerminalSource(host, port) as src:
        yield src


def test_each_symbols_specification_is_the_terminals_symbol_info(source):
    specs = {name: source.spec(name) for name in ("EURUSD", "GBPUSD", "USDJPY")}
    jpy = specs["USDJPY"]
    assert (jpy.digits, jpy.point, jpy.contract_size) == (3, 0.001, 100_000.0)
    assert (jpy.base, jpy.profit_currency, jpy.margin_currency) == ("USD", "JPY", "USD")
    assert (jpy.swap_long, jpy.swap_short, jpy.swap_mode, jpy.swap_rollover3days) == (-6.5, 1.2, "points", 3)
    assert (jpy.volume_min, jpy.volume_step, jpy.trade_mode, jpy.calc_mode) == (0.01, 0.01, "full", "forex")
    assert specs["EURUSD"].digits == 5 and specs["GBPUSD"].base == "GBP"
    assert jpy.description == "US Dollar vs Japanese Yen"


def test_a_symbol_the_terminal_does_not_know_is_refused_by_name(source):
    with pytest.raises(UnknownSymbolError, match=r"has no symbol 'EURUSX'; did you mean EURUSD"):
        source.spec("EURUSX")


def _info(**changes):
    base = dict(
        name="EURUSD", digits=5, point=1e-5, trade_tick_size=1e-5, trade_contract_size=100_000.0,
        currency_base="EUR", currency_profit="USD", currency_margin="EUR", trade_calc_mode=0,
        swap_long=-6.5, swap_short=1.2, swap_mode=1, swap_rollover3days=3, trade_stops_level=0,
        trade_freeze_level=0, volume_min=0.01, volume_max=100.0, volume_step=0.01, trade_mode=4,
    )  # fmt: skip
    return SimpleNamespace(**{**base, **changes})


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"trade_contract_size": float("nan")}, "contract_size=nan: a finite number > 0"),
        ({"digits": 12, "point": 1e-12, "trade_tick_size": 1e-12}, "digits=12: a whole number of decimals"),
        ({"point": 1e-4}, "point=0.0001 is not one point of its 5 digits"),
        ({"trade_tick_size": 2.5e-5}, "trade_tick_size=2.5e-05 is not one point"),
        ({"swap_mode": 7}, "charges swaps in mode 7"),
        ({"swap_long": float("inf")}, "swap_long=inf: a finite number"),
        ({"swap_rollover3days": 0}, "swap_rollover3days=0: a weekday"),
        ({"currency_profit": ""}, "profit_currency='': a currency code"),
        ({"volume_step": -0.01}, "volume_step=-0.01: a finite number > 0"),
    ],
)
def test_a_terminal_record_no_symbol_has_is_one_line_naming_the_field(changes, words):
    with pytest.raises(SpecError, match=words):
        spec_from_symbol_info(_info(**changes))


def test_a_multi_symbol_backtest_from_the_terminal_trades_on_its_conditions(
    capsys, mt5_server, mt5sim, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    host, port = mt5_server
    args = [
        "backtest", "TrendFilterEA", "-s", "mt5", "-o", f"host={host}", "-o", f"port={port}",
        "--broker-tz", "+2/us", "--symbols", "EURUSD,USDJPY", "--from", "2023-01-02", "--to", "2023-04-01",
        "-p", "daily=5", "-p", "hourly=8", "--out", "r", "--no-progress", "--monte-carlo", "0",
        "--bootstrap", "0",
    ]  # fmt: skip
    try:
        main(args)
    except SystemExit as stop:
        assert stop.code in (0, None), capsys.readouterr().err
    trades = pd.read_csv(tmp_path / "r" / "trades.csv")
    held = trades[pd.to_datetime(trades["exit_time"]).dt.date > pd.to_datetime(trades["entry_time"]).dt.date]
    assert len(held) and set(trades["symbol"]) == {"EURUSD", "USDJPY"}
    # the terminal's swaps (-6.5 / +1.2 points): the built-in table has none, so a trade held over a
    # rollover carries a swap only if the terminal's conditions were used
    assert (held["swap"] != 0).any()
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert set(doc["data"]["symbols"]) == {"EURUSD", "USDJPY"}
    swap = {"EURUSD,USDJPY": "EURUSD,EURUSX", "r": "bad"}
    bad = [swap.get(a, a) for a in args]
    with pytest.raises(SystemExit) as stop:
        main(bad)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "has no symbol 'EURUSX'" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bad").exists()


def test_optimize_takes_the_terminals_symbols_with_one_symbols_minutes_from_a_file(
    capsys, mt5_server, mt5sim, tmp_path, monkeypatch
):
    """--m1-csv SYMBOL=FILE with the minutes the terminal exported: that symbol's minutes from the file,
    the other's from the terminal, every pass worked through them on the terminal's specifications."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    host, port = mt5_server
    terminal = ["-s", "mt5", "-o", f"host={host}", "-o", f"port={port}", "--broker-tz", "+2/us"]
    window = ["--from", "2023-01-02", "--to", "2023-02-01"]
    main_args = ["data", "export", "USDJPY", "M1", *terminal, *window, "--out", "uj_m1.csv"]
    try:
        main(main_args)
    except SystemExit as stop:
        assert stop.code in (0, None), capsys.readouterr().err
    args = [
        "optimize", "TrendFilterEA", "-p", "hourly=8,12", "--set", "daily=5", *terminal, *window,
        "--symbols", "EURUSD,USDJPY", "--model", "ohlc1m", "--m1-csv", "USDJPY=uj_m1.csv",
        "--workers", "0", "--out", "o", "--no-progress",
    ]  # fmt: skip
    try:
        main(args)
    except SystemExit as stop:
        assert stop.code in (0, None), capsys.readouterr().err
    out = capsys.readouterr().out
    assert "TrendFilterEA trades EURUSD, USDJPY on one account" in out and "1 minute OHLC" in out
    passes = pd.read_csv(tmp_path / "o" / "results.csv")
    assert len(passes) == 2 and passes["error"].isna().all() and (passes["total_trades"] > 0).all()
    lines = (tmp_path / "uj_m1.csv").read_text().splitlines()
    fields = lines[100].split("\t")
    fields[3] = "999.000"  # the high of data row 100: far above its hour
    lines[100] = "\t".join(fields)
    (tmp_path / "uj_m1.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as stop:
        main([*args[:-2], "o2", "--no-progress"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "uj_m1.csv: row 100 (" in err and "USDJPY high 999.000" in err, err
