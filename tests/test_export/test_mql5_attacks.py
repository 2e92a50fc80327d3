"""The generated Expert Advisors read as an MQL5 programmer reads them: stops on the symbol's price grid,
no decision and no start on a non-finite model output, no hand on the account's manual trades, and the
Python EA's stop distances exactly or not at all."""

import re
import zlib

from test_export.export_support import refused, resaved

from nn import load
from strategies.export import export


def _body(text: str, function: str) -> str:
    """The text of an MQL5 function, from its signature to the closing brace at column 2."""
    start = text.index(function)
    return text[start : text.index("\n  }\n", start)]


def test_stops_are_prices_normalised_to_the_symbols_digits(dense_model, tmp_path):
    """``ask - 300 * _Point`` is 1.1011200000000001 in doubles; the trade server takes SL/TP on the price
    grid (``NormalizeDouble(price, _Digits)``), and CTrade passes them as given."""
    text = export(dense_model, tmp_path).mq5_path.read_text(encoding="utf-8")
    stops = re.findall(r"double (sl|tp) = (.*);", _body(text, "void OnTick()"))
    assert sorted(name for name, _ in stops) == ["sl", "sl", "tp", "tp"]
    for _, expression in stops:
        assert re.fullmatch(r"InpS?T?[LP]Points > 0 \? NormalizeDouble\(.*, _Digits\) : 0\.0", expression), (
            expression
        )


def test_a_non_finite_output_fails_the_parity_check_and_never_trades(dense_model, forecast_models, tmp_path):
    """``MathAbs(NaN - x) > tolerance`` is false: a NaN passed the start-up check; and a NaN forecast
    closed positions (``move > threshold`` false both ways). The Python EAs skip a non-finite output."""
    for model, output in ((dense_model, "p"), (forecast_models["patchtst"], "y")):
        text = export(model, tmp_path).mq5_path.read_text(encoding="utf-8")
        init, tick = _body(text, "int OnInit()"), _body(text, "void OnTick()")
        check = init[init.index("parity:") : init.index("parity check failed")]
        assert "!MathIsValidNumber(" in check
        decided = tick[tick.index("OnnxRun failed") :]
        assert f"if(!Finite({output}))" in decided
        first_trade = min(decided.index(w) for w in ("CloseAll(", "ExtTrade."))
        assert decided.index(f"if(!Finite({output}))") < first_trade
        assert "bool Finite(" in text


def test_the_ea_does_not_take_the_manual_trades_magic_number(dense_model, tmp_path):
    """Magic 0 is the number of trades opened by hand: an EA of magic 0 counted them in its net position and
    closed them at its time exit. An EA trained with magic 0 gets a number of its own (the CRC-32 of its
    model), and refuses to start with 0."""
    done = export(dense_model, tmp_path)
    text = done.mq5_path.read_text(encoding="utf-8")
    assert load(dense_model, backend="numpy").metadata["params"].get("magic", 0) == 0
    magic = int(re.search(r"input long   InpMagic     = (\d+);", text).group(1))
    assert magic == (zlib.crc32(done.onnx_path.read_bytes()) or 1) and magic > 0
    init = _body(text, "int OnInit()")
    refuse = init[init.index("InpMagic <= 0") :]
    assert refuse.index("return(INIT_PARAMETERS_INCORRECT);") < refuse.index("OnnxCreateFromBuffer")
    own = resaved(dense_model, tmp_path, params={**load(dense_model, backend="numpy").metadata["params"],
                                                 "magic": 24680})  # fmt: skip
    own_text = export(own, tmp_path / "own").mq5_path.read_text(encoding="utf-8")
    assert "input long   InpMagic     = 24680;" in own_text


def test_stop_distances_that_are_not_whole_points_are_refused(dense_model, tmp_path):
    """The EA places stops a whole number of points away (``input int``): 150.5 points became 150 in the
    .mq5 while the Python EA and OnnxEA kept 150.5. Refused, naming the parameter; 300.0 is whole."""
    params = load(dense_model, backend="numpy").metadata["params"]
    for name in ("sl_points", "tp_points"):
        hostile = resaved(dense_model, tmp_path, params={**params, name: 150.5})
        refused(hostile, tmp_path / "out", f"{name}=150.5 is not a whole number of points")


def test_names_that_cannot_reach_a_windows_terminal_folder_are_refused(dense_model, tmp_path):
    """The pair goes into MetaTrader's ``MQL5\\Experts`` on Windows: ``CON``, ``nul``, ``COM1`` and ``LPT9``
    (with any extension) are devices there, not files, and a name outside ASCII is the ``#resource`` path of
    a source MetaEditor may read in another code page. Refused before anything is written."""
    for name in ("CON", "nul", "Com1.model", "LPT9", "é名", "ＥＡ"):
        refused(dense_model, tmp_path / "out", "plain file name", name=name)
    assert export(dense_model, tmp_path / "ok", name="CONSOLE_EA v2.1").mq5_path.exists()
