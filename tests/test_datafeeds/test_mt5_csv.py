import numpy as np
import pandas as pd
import pytest

from datafeeds import (
    BrokerClock,
    CandleDataError,
    Timeframe,
    meta_of,
    read_mt5_csv,
    read_sample,
    write_mt5_csv,
)
from datafeeds.sample import sample_path

MT5_EXPORT = (
    "<DATE>\t<TIME>\t<OPEN>\t<HIGH>\t<LOW>\t<CLOSE>\t<TICKVOL>\t<VOL>\t<SPREAD>\n"
    "2017.11.03\t22:00:00\t1.16100\t1.16180\t1.16050\t1.16120\t812\t0\t12\n"
    "2017.11.03\t23:00:00\t1.16120\t1.16200\t1.16090\t1.16150\t640\t5\t15\n"
    "2017.11.06\t00:00:00\t1.16080\t1.16110\t1.15990\t1.16000\t301\t0\t40\n"
    "2017.11.06\t01:00:00\t1.16000\t1.16070\t1.15980\t1.16060\t455\t0\t9\n"
)


def _write(tmp_path, text, name="EURUSD_H1.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_terminal_export_in_broker_time_reads_to_utc_and_writes_back_identically(tmp_path):
    path = _write(tmp_path, MT5_EXPORT)
    df = read_mt5_csv(path, clock=BrokerClock(2, "us"))
    meta = meta_of(df)
    assert (meta.symbol, meta.timeframe, meta.digits) == ("EURUSD", Timeframe.H1, 5)
    # Friday 22:00 broker = 19:00 UTC (UTC+3 before New York's switch); Monday 00:00 broker = 22:00 UTC Sunday
    assert [t.strftime("%m-%d %H:%M") for t in df.index] == [
        "11-03 19:00",
        "11-03 20:00",
        "11-05 22:00",
        "11-05 23:00",
    ]
    assert df["spread"].tolist() == [12, 15, 40, 9]
    assert df["real_volume"].tolist() == [0, 5, 0, 0]
    assert df["tick_volume"].dtype == np.uint64 and df["spread"].dtype == np.int32
    out = write_mt5_csv(df, tmp_path / "out.csv")
    assert out.read_text() == MT5_EXPORT


def test_sample_round_trip_is_exact(tmp_path):
    df = read_sample(spread=7)
    first = write_mt5_csv(df, tmp_path / "EURUSD_H1.csv")
    back = read_mt5_csv(first)
    pd.testing.assert_frame_equal(back, df)
    assert meta_of(back).digits == 5
    second = write_mt5_csv(back, tmp_path / "again.csv")
    assert second.read_bytes() == first.read_bytes()


def test_d1_file_without_time_column(tmp_path):
    text = (
        "<DATE>\t<OPEN>\t<HIGH>\t<LOW>\t<CLOSE>\t<TICKVOL>\t<VOL>\t<SPREAD>\n"
        "2017.06.05\t1.12800\t1.12900\t1.12100\t1.12500\t5000\t0\t3\n"
        "2017.06.06\t1.12500\t1.12850\t1.12400\t1.12700\t4000\t0\t2\n"
    )
    df = read_mt5_csv(_write(tmp_path, text, "GBPUSD_D1.csv"))
    assert meta_of(df).timeframe is Timeframe.D1 and meta_of(df).symbol == "GBPUSD"
    assert df.index[1] == pd.Timestamp("2017-06-06", tz="UTC")


ROWS = ("1.1,1.2,1.0,1.15,7", "1.15,1.2,1.1,1.12,8")
VARIANTS = {
    "comma": ("Date,Time,Open,High,Low,Close,Volume", "2017-06-06,{h}:00", "\n"),
    "semicolon": ("Date;Time;Open;High;Low;Close;Volume", "2017.06.06;{h}:00:00", "\n"),
    "pandas-index": (",Open,High,Low,Close,Volume", "2017-06-06 {h}:00:00", "\n"),
    "datetime-column": ("Datetime,Open,High,Low,Close,Volume", "2017-06-06T{h}:00", "\n"),
    "mt4-headerless": (None, "2017.06.06,{h}:00", "\r\n"),
}


def _variant(header, stamp, newline):
    sep = ";" if header and ";" in header else ","
    rows = [stamp.format(h=h) + sep + r.replace(",", sep) for h, r in zip((10, 11), ROWS, strict=True)]
    return newline.join(([header] if header else []) + rows) + newline


@pytest.mark.parametrize("variant", VARIANTS)
def test_comma_separated_variants(tmp_path, variant):
    df = read_mt5_csv(_write(tmp_path, _variant(*VARIANTS[variant])), symbol="eurusd")
    assert meta_of(df).symbol == "EURUSD" and meta_of(df).timeframe is Timeframe.H1
    assert df.index[0] == pd.Timestamp("2017-06-06 10:00", tz="UTC")
    assert df["close"].tolist() == [1.15, 1.12]
    assert df["tick_volume"].tolist() == [7, 8]  # a lone Volume column counts ticks


def test_utf16_export_with_byte_order_mark(tmp_path):
    path = tmp_path / "EURUSD_H1.csv"
    path.write_bytes(b"\xff\xfe" + MT5_EXPORT.replace("\n", "\r\n").encode("utf-16-le"))
    assert len(read_mt5_csv(path)) == 4


def test_the_sample_file_itself_reads_as_a_csv_variant():
    df = read_mt5_csv(sample_path(), symbol="EURUSD")
    pd.testing.assert_frame_equal(df, read_sample(), check_like=False)


HEADER6 = "<DATE>\t<TIME>\t<OPEN>\t<HIGH>\t<LOW>\t<CLOSE>\n"
COMMA_ROW = "2017.11.06,00:00:00,1.16080,1.16110,1.15990,1.16000,301,0,40"
BAD = [
    ("empty", "", "empty file"),
    ("blank", "\n\n", "empty file"),
    ("header-only", HEADER6, "line 1: the file has a header but no bars"),
    ("wrong-header", HEADER6.replace("CLOSE", "SHUT"), "line 1: unknown column 'shut'"),
    ("no-close", "Date,Time,Open,High,Low\n2017-06-06,10:00,1,1,1\n", "line 1: header .* lacks close"),
    ("no-delimiter", "DATE TIME OPEN HIGH LOW CLOSE\n", "line 1: cannot find the delimiter"),
    ("bad-number", MT5_EXPORT.replace("1.16090", "1.16O90"), "line 3: low '1.16O90' is not a number"),
    ("truncated", MT5_EXPORT[: MT5_EXPORT.index("\t301")] + "\n", "line 4: truncated line: expected 9"),
    ("too-many", MT5_EXPORT.replace("\t9\n", "\t9\t1\n"), "line 5: too many fields"),
    (
        "wrong-delimiter",
        MT5_EXPORT.replace(COMMA_ROW.replace(",", "\t"), COMMA_ROW),
        "line 4: .* by comma, but",
    ),
    ("bad-date", MT5_EXPORT.replace("2017.11.06\t01", "2017.13.06\t01"), "line 5: cannot read date/time"),
    ("negative-volume", MT5_EXPORT.replace("\t455\t", "\t-455\t"), "line 5: tick_volume '-455' is not"),
    ("blank-line", MT5_EXPORT.replace("\n2017.11.06\t00", "\n\n2017.11.06\t00"), "line 4: empty line"),
    ("inconsistent", MT5_EXPORT.replace("1.16180", "1.16000"), "high below open or close.*line 2 2017-11-03"),
]


@pytest.mark.parametrize("name,text,message", BAD, ids=[b[0] for b in BAD])
def test_malformed_files_give_one_line_naming_file_and_line(tmp_path, name, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(CandleDataError, match=message) as err:
        read_mt5_csv(path)
    assert str(err.value).startswith(str(path) + ": ")
    assert "\n" not in str(err.value)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.csv: no such file"):
        read_mt5_csv(tmp_path / "nope.csv")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_mt5_csv(tmp_path)


def test_single_bar_needs_a_timeframe(tmp_path):
    path = _write(tmp_path, MT5_EXPORT.split("\n", 2)[0] + "\n" + MT5_EXPORT.split("\n")[1] + "\n")
    with pytest.raises(CandleDataError, match="pass timeframe"):
        read_mt5_csv(path)
    assert meta_of(read_mt5_csv(path, timeframe="H1")).timeframe is Timeframe.H1


def test_write_refuses_to_round_prices_and_leaves_the_old_file(tmp_path):
    path = write_mt5_csv(read_sample(), tmp_path / "EURUSD_H1.csv")
    before = path.read_bytes()
    with pytest.raises(ValueError, match="needs more than 3 digits"):
        write_mt5_csv(read_sample(), path, digits=3)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["EURUSD_H1.csv"]  # no temporary file left


def test_comma_dialect_writes_the_common_header(tmp_path):
    path = write_mt5_csv(read_sample().iloc[:3], tmp_path / "x.csv", dialect="csv")
    lines = path.read_text().splitlines()
    assert lines[0] == "Date,Time,Open,High,Low,Close,Volume"
    assert lines[1] == "2017-04-19,09:00:00,1.07160,1.07220,1.07083,1.07219,1413"


def test_extreme_volumes_and_spreads_round_trip(tmp_path, candles):
    df = candles(
        ["2017-06-06 10:00", "2017-06-06 11:00", "2017-06-06 12:00"],
        [(1.1, 1.2, 1.0, 1.1), (99999.12345, 99999.12345, 0.00001, 0.1), (7.0, 7.0, 7.0, 7.0)],
        tick_volume=[0, 10**19, 7],
        real_volume=[2**64 - 1, 0, 10],
        spread=[0, 2**31 - 1, 12],
    )
    path = write_mt5_csv(df, tmp_path / "EURUSD_H1.csv")
    assert path.read_text().splitlines()[2].split("\t")[2:] == [
        "99999.12345", "99999.12345", "0.00001", "0.10000", "10000000000000000000", "0", "2147483647",
    ]  # fmt: skip
    pd.testing.assert_frame_equal(read_mt5_csv(path), df, check_exact=True)
