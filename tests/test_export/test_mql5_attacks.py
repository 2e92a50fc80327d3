"""The generated Expert Advisors read as an MQL5 programmer reads them: stops on the symbol's price grid,
no decision and no start on a non-finite model output, no hand on the account's manual trades, and the
Python EA's stop distances exactly or not at all."""

import re

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

