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

