import pandas as pd
import pytest

from datafeeds import (
    SOURCES,
    CandleDataError,
    CandleSource,
    Repair,
    SourceUnavailableError,
    UnknownSourceError,
    get_source,
    load_candles,
    load_validated,
    meta_of,
    read_sample,
    write_mt5_csv,
)
from datafeeds import sources as registry


def test_registry_names():
    assert list(SOURCES) == ["sample", "csv", "mt5", "synthetic", "dukascopy"]
    for name in ("sample", "synthetic"):
        assert isinstance(get_source(name), CandleSource)


def test_unknown_source_suggests_a_close_name():
    with pytest.raises(UnknownSourceError, match="did you mean 'synthetic'"):
        get_source("synthetc")
    assert issubclass(UnknownSourceError, LookupError)


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"no option 'sead'; did you mean '.*'\? \(it takes: seed, bars"):
        get_source("synthetic", sead=1)


def test_a_source_that_cannot_be_imported_disables_only_itself(monkeypatch):
    monkeypatch.setitem(registry.SOURCES, "broken", "datafeeds.no_such_module:Nothing")
    with pytest.raises(SourceUnavailableError, match="'broken' is not available here"):
        get_source("broken")
    assert len(load_candles("sample")) == 5000


def test_start_is_inclusive_and_end_exclusive():
    df = load_candles(start="2017-06-01 10:00", end="2017-06-01 13:00")
    assert [t.hour for t in df.index] == [10, 11, 12]
    tz = load_candles(start=pd.Timestamp("2017-06-01 12:00", tz="Europe/Berlin"), end="2017-06-01 13:00")
    assert [t.hour for t in tz.index] == [10, 11, 12]  # 12:00 Berlin summer time is 10:00 UTC
    assert meta_of(df).symbol == "EURUSD"


@pytest.mark.parametrize("name", ["sample", "csv", "synthetic"])
def test_each_source_honours_the_window_itself(name, tmp_path):
    # Callers of a source's own load() (not load_candles) must get the window too.
    options = {"path": str(write_mt5_csv(read_sample(), tmp_path / "EURUSD_H1.csv"))} if name == "csv" else {}
    df = get_source(name, **options).load("EURUSD", "H1", "2017-06-01 10:00", "2017-06-01 13:00")
    assert [str(t) for t in df.index] == [f"2017-06-01 {h}:00:00+00:00" for h in (10, 11, 12)]
    assert meta_of(df).symbol == "EURUSD"


def test_bad_window():
    with pytest.raises(ValueError, match="must come before"):
        load_candles(start="2017-06-02", end="2017-06-01")
    with pytest.raises(ValueError, match="cannot read start 'yesterday-ish'"):
        load_candles(start="yesterday-ish")


def test_csv_source_resamples_to_a_higher_timeframe(tmp_path):
    path = write_mt5_csv(read_sample(), tmp_path / "EURUSD_H1.csv")
    h4 = load_candles("csv", timeframe="H4", path=str(path), clock="UTC")
    assert meta_of(h4).timeframe.name == "H4" and meta_of(h4).symbol == "EURUSD"
    assert h4["tick_volume"].sum() == read_sample()["tick_volume"].sum()


def test_every_load_is_validated_and_repair_is_opt_in(tmp_path):
    text = write_mt5_csv(read_sample().iloc[:5], tmp_path / "EURUSD_H1.csv").read_text().splitlines()
    text.insert(3, text[2])  # a duplicated bar on line 4
    path = tmp_path / "dup.csv"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(CandleDataError, match=r"duplicate bar times.*line 4"):
        load_candles("csv", path=str(path))
    report = load_validated("csv", path=str(path), repair=Repair(drop_duplicates=True))
    assert len(report.frame) == 5 and "dropped 1 duplicate bars" in report.changes[0]


def test_synthetic_source_window():
    df = load_candles("synthetic", "GBPUSD", "M30", "2022-03-07", "2022-03-08", seed=9)
    assert len(df) == 48 and meta_of(df).symbol == "GBPUSD"


def test_mt5_source_is_reached_through_the_registry(mt5_server, mt5sim, sim_market):
    host, port = mt5_server
    _, utc = sim_market.history("EURUSD", 16385)
    start, end = (pd.Timestamp(int(t), unit="s", tz="UTC") for t in utc[[100, 148]])
    df = load_candles("mt5", "EURUSD", "H1", start, end, host=host, port=port)
    assert list(df.index.as_unit("s").asi8) == list(utc[100:148])
    assert meta_of(df).source.startswith("mt5:")


def test_mt5_options_pass_through_the_cli(mt5_server, mt5sim, capsys):
    from neuronet.cli import main

    host, port = mt5_server
    args = [
        "data",
        "show",
        "EURUSD",
        "H1",
        "--source",
        "mt5",
        "-o",
        f"host={host}",
        "-o",
        f"port={port}",
        "-n",
        "1",
    ]
    main(args)
    out = capsys.readouterr().out
    assert "EURUSD H1   source mt5:" in out and "0 unexpected" in out
