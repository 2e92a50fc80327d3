"""Symbol specifications: the built-in table, a user's TOML or JSON file and the terminal's symbol_info, each
checked the same way; every bad field is one line naming the file, the symbol and the field."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from datafeeds.symbols import (
    BUILTIN,
    SpecError,
    UnknownSpecError,
    find_spec,
    read_spec_file,
    spec_from_symbol_info,
)


def test_the_builtin_table_has_the_majors_crosses_and_metals_as_retail_brokers_quote_them():
    assert BUILTIN["EURUSD"].digits == 5 and BUILTIN["USDJPY"].digits == 3
    assert BUILTIN["EURGBP"].profit_currency == "GBP" and BUILTIN["EURGBP"].margin_currency == "EUR"
    assert BUILTIN["XAUUSD"].contract_size == 100.0 and BUILTIN["XAUUSD"].digits == 2
    assert BUILTIN["USDJPY"].tick_value == pytest.approx(100.0)  # 100,000 x 0.001 yen a point and lot


def test_a_toml_file_changes_a_builtin_symbol_and_adds_a_new_one(tmp_path):
    path = tmp_path / "symbols.toml"
    path.write_text(
        "[EURUSD]\nswap_long = -6.5\nstops_level = 10\n\n"
        '[US500]\ndigits = 1\ncontract_size = 10\nbase = "USD"\nprofit_currency = "USD"\n'
        'margin_currency = "USD"\ncalc_mode = "cfd"\n'
    )
    specs = read_spec_file(path)
    assert specs["EURUSD"].swap_long == -6.5 and specs["EURUSD"].digits == 5  # the rest built in
    assert specs["US500"].calc_mode == "cfd" and specs["US500"].point == pytest.approx(0.1)
    assert find_spec("US500", specs) is specs["US500"]


def test_a_symbols_file_gives_the_swap_mode_and_the_triple_swap_day_by_name_or_number(tmp_path):
    path = tmp_path / "symbols.toml"
    path.write_text(
        '[USDJPY]\nswap_long = -1.5\nswap_mode = "interest_current"\nswap_rollover3days = "Friday"\n\n'
        "[EURGBP]\nswap_short = 0.8\nswap_rollover3days = 3.0\n"
    )
    specs = read_spec_file(path)
    assert (specs["USDJPY"].swap_mode, specs["USDJPY"].swap_rollover3days) == ("interest_current", 5)
    assert (specs["EURGBP"].swap_mode, specs["EURGBP"].swap_rollover3days) == ("points", 3)


def test_a_json_file_reads_as_the_toml_one(tmp_path):
    path = tmp_path / "symbols.json"
    path.write_text('{"GBPUSD": {"volume_min": 0.1, "volume_step": 0.1}}')
    assert read_spec_file(path)["GBPUSD"].volume_min == 0.1


@pytest.mark.parametrize(
    "text, words",
    [
        ("[EURUSD]\ndigist = 4\n", "unknown field 'digist'; did you mean 'digits'?"),
        ("[FOOBAR]\ndigits = 2\n", "not a built-in symbol, so the file must give"),
        ("[EURUSD]\ncontract_size = -1\n", "contract_size=-1.0: a finite number > 0"),
        ('[EURUSD]\ncalc_mode = "futures"\n', "calc_mode='futures': one of forex"),
        ('[EURUSD]\nprofit_currency = "usd"\n', "a currency code of three capital letters"),
        ("[EURUSD]\nvolume_max = 0.001\n", "volume_max=0.001: below volume_min"),
        ("[EURUSD]\nstops_level = 2.5\n", "stops_level=2.5: a whole number of points"),
        ('[EURUSD]\nswap_mode = "reopen_bid"\n', "swap_mode='reopen_bid': one of disabled, points"),
        ("[EURUSD]\nswap_rollover3days = 0\n", "swap_rollover3days=0: a weekday 1 (Monday) to 5"),
        ('[EURUSD]\nswap_rollover3days = "someday"\n', "swap_rollover3days='someday': a weekday"),
        ("[EURUSD]\nswap_long = nan\n", "swap_long=nan: a finite number"),
        ("EURUSD = 5\n", "symbol EURUSD: expected a table of fields, not int"),
        ("[EURUSD\n", "not valid TOML"),
        (  # a new symbol's own fields are checked naming the file too
            '[FOO]\ndigits = 2\ncontract_size = 1\nbase = "X"\n'
            'profit_currency = "USD"\nmargin_currency = "USD"\n',
            "symbol FOO: base='X': a currency code",
        ),
        ("", "expected one table per symbol"),
    ],
)
def test_a_bad_symbols_file_is_one_line_naming_the_file_and_the_field(tmp_path, text, words):
    path = tmp_path / "symbols.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        read_spec_file(path)
    message = str(info.value)
    assert words in message and str(path) in message and "\n" not in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("name", "text", "twice"),
    [
        ("dup.json", '{"EURUSD": {"swap_long": -50.0}, "EURUSD": {"swap_long": 5.0}}', "EURUSD"),
        ("dupf.json", '{"EURUSD": {"swap_long": -50.0, "swap_long": 5.0}}', "swap_long"),
        ("dup.toml", "[EURUSD]\nswap_long = -50.0\n[EURUSD]\nswap_long = 5.0\n", None),
        ("dupf.toml", "[EURUSD]\nswap_long = -50.0\nswap_long = 5.0\n", None),
    ],
    ids=["json symbol", "json field", "toml symbol", "toml field"],
)
def test_a_symbol_or_field_given_twice_is_refused_not_the_last_one_kept(tmp_path, name, text, twice):
    """JSON keeps the last of two equal keys silently: a swap of -50 points a night overridden by a +5 credit
    further down the file (TOML refuses both already)."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        read_spec_file(path)
    assert str(path) in str(err.value)
    if twice is not None:
        assert f"{twice!r} is given twice" in str(err.value)


def test_a_symbol_is_found_in_the_file_whatever_its_case_as_the_sources_name_it_in_capitals(tmp_path):
    """Every source and ``--symbols`` name a symbol in capitals (eurusd is EURUSD, a broker's EURUSD.a is
    EURUSD.A), so a file's ``[eurusd]`` with all its fields and a swap of -50 points was a table no run
    looked up: the built-in EURUSD traded without swaps. A name given twice in two cases is refused."""
    path = tmp_path / "symbols.toml"
    path.write_text(
        "[eurusd]\ndigits = 5\ncontract_size = 100000\nbase = 'EUR'\nprofit_currency = 'USD'\n"
        "margin_currency = 'EUR'\nswap_long = -50.0\n\n"
        "['EURUSD.a']\ndigits = 5\ncontract_size = 100000\nbase = 'EUR'\nprofit_currency = 'USD'\n"
        "margin_currency = 'EUR'\n"
    )
    specs = read_spec_file(path)
    assert find_spec("EURUSD", specs).swap_long == -50.0
    assert find_spec("EURUSD.A", specs).name == "EURUSD.A"
    path.write_text("[eurusd]\nswap_long = -50.0\n\n[EURUSD]\nswap_long = 1.0\n")
    with pytest.raises(SpecError, match=r"symbols\.toml: symbol 'EURUSD' is given twice"):
        read_spec_file(path)


def test_a_file_that_is_not_toml_json_or_text_is_refused_by_name(tmp_path):
    for name, data in (("symbols.csv", b"a,b\n"), ("symbols.toml", b"\xff\xfe[EURUSD]")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(SpecError, match=name):
            read_spec_file(path)


def test_a_symbol_nobody_knows_is_refused_by_name_with_a_suggestion():
    with pytest.raises(
        UnknownSpecError, match=r"no specification for symbol 'EURUDS' \(did you mean EURUSD\?\)"
    ):
        find_spec("EURUDS")


def test_the_terminals_symbol_info_becomes_a_specification_and_an_unknown_mode_is_refused():
    info = SimpleNamespace(
        name="GER40", digits=1, trade_contract_size=1.0, currency_base="EUR", currency_profit="EUR",
        currency_margin="EUR", trade_calc_mode=2, swap_long=-3.0, swap_short=1.0, trade_stops_level=20,
        trade_freeze_level=0, volume_min=0.1, volume_max=50.0, volume_step=0.1, trade_mode=4,
        description="Germany 40",
    )  # fmt: skip
    spec = spec_from_symbol_info(info)
    assert (spec.calc_mode, spec.trade_mode, spec.stops_level) == ("cfd", "full", 20)
    assert (spec.swap_mode, spec.swap_rollover3days) == ("points", 3)  # a terminal without the fields
    info.swap_mode, info.swap_rollover3days = 6, 5
    assert (spec_from_symbol_info(info).swap_mode, spec_from_symbol_info(info).swap_rollover3days) == (
        "interest_open",
        5,
    )
    info.swap_mode = 8  # reopen at the bid: not modelled
    with pytest.raises(SpecError, match=r"GER40 charges swaps in mode 8 \(SYMBOL_SWAP_MODE\)"):
        spec_from_symbol_info(info)
    info.swap_mode = 1
    info.trade_calc_mode = 32  # exchange stocks
    with pytest.raises(SpecError, match="calculation mode 32"):
        spec_from_symbol_info(info)
