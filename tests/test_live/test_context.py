"""The EA's growing view in a live run: closed bars only, indicators recomputed and proved causal."""

from __future__ import annotations

import numpy as np
import pytest

from backtests.replay import LookAheadError
from datafeeds import load_candles
from neuronet.live.context import LiveBars, LiveContext
from strategies.base import ExpertAdvisor
from strategies.indicators import sma


class _Lines(ExpertAdvisor):
    def on_init(self) -> None:
        self.fast = self.indicator(lambda b: sma(b.close, 3), "sma3")


class _Peeks(ExpertAdvisor):
    def on_init(self) -> None:
        self.line = self.indicator(lambda b: np.full(len(b), b.close[-1]), "last_close")


class _Float32Network(ExpertAdvisor):
    def on_init(self) -> None:
        # A network's float32 outputs, which a GPU rounds a few ulps apart for another batch's rows.
        self.line = self.indicator(
            lambda b: b.close.astype(np.float32) * np.float32(1.0 + 2.4e-7 * (len(b) % 7)), "network"
        )


class _Changes(ExpertAdvisor):
    def on_init(self) -> None:
        # Causal on the history the run starts with; its past changes once the 51st bar closes.
        self.line = self.indicator(lambda b: b.close * (2.0 if len(b) > 50 else 1.0), "drifts")


def _setup(ea_class, n=50):
    df = load_candles("sample").iloc[:80]
    bars = LiveBars(df.iloc[:n], df.attrs["candles"])
    ea = ea_class()
    ctx = LiveContext(
        trading=None, bars=bars, record=lambda *a, **k: {}, now=lambda: df.index[n], bar=lambda: n
    )
    ea.attach(ctx, bars.feed.bars)
    return df, bars, ea


def test_bars_and_indicators_grow_as_bars_close(monkeypatch):
    df, bars, ea = _setup(_Lines)
    ea.on_init()
    kept_close = ea.bars.close  # an array kept from an earlier bar never shows later ones
    for t in range(50, 60):
        bars.append(df.iloc[t : t + 1])
        assert len(ea.bars) == t  # appended, not visible until shown
        bars.show(ea)
        assert len(ea.bars) == t + 1 and ea.bars.close[-1] == df["close"].iloc[t]
        assert ea.fast[-1] == pytest.approx(df["close"].iloc[t - 2 : t + 1].mean())
        assert len(ea.fast.values) == t + 1
    assert len(kept_close) == 50 and not np.isnan(kept_close).any()
    np.testing.assert_array_equal(ea.bars.time, df.index[:60])
    with pytest.raises(IndexError):
        ea.fast[60]


def test_a_peeking_indicator_is_caught_at_on_init():
    _, _, ea = _setup(_Peeks)
    with pytest.raises(LookAheadError, match="last_close"):
        ea.on_init()


def test_an_indicator_whose_past_changes_is_caught_live():
    df, bars, ea = _setup(_Changes)
    ea.on_init()
    bars.append(df.iloc[50:51])
    with pytest.raises(LookAheadError, match="'drifts' looks ahead: its value on bar 0"):
        bars.show(ea)


def test_float32_rounding_of_another_batch_is_not_a_look_ahead_live():
    """A live FractalEA on a GPU: each closed bar recomputes the network's outputs on one more row, which
    round a few ulps apart; compared at 1e-9 every new bar was refused as a look-ahead."""
    df, bars, ea = _setup(_Float32Network)
    ea.on_init()
    for t in range(50, 56):
        bars.append(df.iloc[t : t + 1])
        bars.show(ea)
    assert len(ea.line.values) == 56
