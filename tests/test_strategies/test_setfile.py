"""MetaTrader .set files: read as the terminal writes them (UTF-16 LE with BOM) and as people write them
(UTF-8), every bad line one error naming the file, the line and the input, and written back readable."""

import codecs

import pytest

from strategies import FractalEA, SmaCrossEA
from strategies.setfile import SetFileError, SetRange, format_set, read_set, write_set

TERMINAL = (
    "; saved on 2024.03.01 10:00:00\r\n"
    "; this file contains input parameters for testing/optimizing SmaCrossEA expert advisor\r\n"
    ";\r\n"
    "fast=10||5||5||50||Y\r\n"
    "slow=20||20||10||200||Y\r\n"
    "lots=0.5||0.1||0.1||1.0||N\r\n"
    "sl_points=150\r\n"
)


def _utf16(path, text):
    path.write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    return path


def test_a_terminal_set_file_is_read_with_its_ranges_and_flags(tmp_path):
    got = read_set(_utf16(tmp_path / "sma.set", TERMINAL), SmaCrossEA)
    assert got.values == {"fast": "10", "slow": "20", "lots": "0.5", "sl_points": "150"}
    assert got.ranges["fast"] == SetRange(5, 5, 50, True) and got.ranges["lots"] == SetRange(
        0.1, 0.1, 1.0, False
    )
    assert got.searched() == {"fast": "5:50:5", "slow": "20:200:10"}
    assert got.fixed() == {"lots": "0.5", "sl_points": "150"}
    assert got.lines["slow"] == 5


def test_utf8_with_and_without_bom_reads_the_same(tmp_path):
    plain = tmp_path / "a.set"
    plain.write_text(TERMINAL.replace("\r\n", "\n"), encoding="utf-8")
    bom = tmp_path / "b.set"
    bom.write_bytes(codecs.BOM_UTF8 + TERMINAL.encode())
    want = read_set(_utf16(tmp_path / "c.set", TERMINAL), SmaCrossEA)
    for path in (plain, bom):
        got = read_set(path, SmaCrossEA)
        assert (got.values, got.ranges) == (want.values, want.ranges)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("fsat=10", "line 4 (fsat): SmaCrossEA has no parameter 'fsat'; did you mean 'fast'?"),
        ("fast=ten", "line 4 (fast): SmaCrossEA parameter 'fast' expects int"),
        ("fast=10||50||5||5||Y", "line 4 (fast): start 50 lies beyond stop 5"),
        ("fast=10||5||0||50||Y", "line 4 (fast): step 0 must be > 0"),
        ("fast=10||5||-5||50||Y", "line 4 (fast): step -5 must be > 0"),
        ("fast=10||5||x||50||Y", "line 4 (fast): step 'x' is not a int"),
        ("fast=10||5||5||50||maybe", "line 4 (fast): the optimisation flag must be Y or N"),
        ("fast=10||5||5", "line 4 (fast): expected value or value||start||step||stop||Y/N, got 3 fields"),
        ("fast", "line 4: expected name=value"),
        ("slow=30", "line 5 (slow): given twice (first on line 4)"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_line_and_input(tmp_path, line, says):
    text = "; header\n;\n\n" + line + "\n" + ("slow=20\n" if line != "slow=30" else "")
    if line == "slow=30":
        text = "; header\n;\n\nslow=20\nslow=30\n"
    path = tmp_path / "bad.set"
    path.write_text(text)
    with pytest.raises(SetFileError) as info:
        read_set(path, SmaCrossEA)
    message = str(info.value)
    assert message.startswith(f"{path} ") and says in message and "\n" not in message


def test_a_file_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "blob.set"
    path.write_bytes(b"\xff\xfe\x00\xd8")  # a BOM and half a surrogate pair
    with pytest.raises(SetFileError, match=r"not a MetaTrader \.set file"):
        read_set(path, SmaCrossEA)


def test_written_as_the_terminal_writes_and_read_back(tmp_path):
    ranges = {"fast": SetRange(5, 5, 50, True)}
    path = write_set(tmp_path / "best.set", "SmaCrossEA", {"fast": 15, "slow": 40, "lots": 1.0}, ranges)
    raw = path.read_bytes()
    assert raw.startswith(codecs.BOM_UTF16_LE) and "fast=15||5||5||50||Y\r\n" in raw.decode("utf-16")
    got = read_set(path, SmaCrossEA)
    assert got.values == {"fast": "15", "slow": "40", "lots": "1.0"} and got.searched() == {"fast": "5:50:5"}


def test_text_and_bool_inputs_keep_their_values():
    text = format_set("FractalEA", {"hidden": "500,250", "rule": "3bar"})
    assert "hidden=500,250\r\n" in text and text.startswith("; saved on ")
    assert FractalEA.resolve_params({"hidden": "500,250"})["hidden"] == "500,250"


def test_a_file_too_large_for_a_set_file_is_refused_before_it_is_decoded(tmp_path):
    path = tmp_path / "huge.set"
    path.write_bytes(b"fast=10\n" * 200_000)  # 1.6 MB: no EA has that many inputs
    with pytest.raises(SetFileError, match="larger than 1024 KiB"):
        read_set(path, SmaCrossEA)


def test_a_set_file_with_a_value_that_is_not_finite_names_the_line(tmp_path):
    path = tmp_path / "nan.set"
    path.write_text("lots=0.1||0.1||nan||1.0||Y\n")
    with pytest.raises(SetFileError, match=r"line 1 \(lots\): step 'nan'"):
        read_set(path, SmaCrossEA)
