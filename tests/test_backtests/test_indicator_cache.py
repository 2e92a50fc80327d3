"""An indicator proved causal once is not proved again for the same function, bars and probe points, and
nothing else ever reuses a proof: a function whose result may depend on state its key cannot see is proved
in every call, a failed proof is never kept, and a look-ahead is caught in every optimisation pass that
meets it, after the first as in the first."""

from __future__ import annotations

import functools
import types

import numpy as np
import pandas as pd
import pytest
from test_backtests.test_cheating_ea import DF

from backtests import Backtest, LookAheadError
from backtests.indicator_cache import PROVEN, ProvenIndicators, digest, fingerprint
from backtests.optimize import optimize
from backtests.replay import causal_indicator
from datafeeds import meta_of
from strategies import ExpertAdvisor, SmaCrossEA
from strategies.bars import BarFeed
from strategies.indicators import sma

SCALE = 2.0  # a global a test rebinds
HELPERS = types.ModuleType("helpers")  # a module whose attribute a test rebinds
HELPERS.period = 5
ARRAY = np.array([5])  # a global that is not a plain value


def _window(period):
    return lambda b: sma(b.close, period)


def _own_attribute(b):
    """An indicator reading an attribute of itself (set by an EA before it declares it)."""
    return sma(b.close, _own_attribute.period)


_own_attribute.period = 5


def _lead(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` moved ``k`` bars earlier (k > 0 reads the future) or ``-k`` bars later."""
    out = np.full_like(x, np.nan)
    if k > 0:
        out[: len(x) - k] = x[k:]
    else:
        out[-k:] = x[: len(x) + k]
    return out


@pytest.fixture(autouse=True)
def _fresh():
    PROVEN.clear()
    yield
    PROVEN.clear()


def test_a_function_is_known_by_its_code_and_every_value_it_reads():
    assert fingerprint(_window(5)) == fingerprint(_window(5))
    assert fingerprint(_window(5)) != fingerprint(_window(6))
    # the same number of another type or sign is another input
    keys = {fingerprint(_window(v)) for v in (1, 1.0, True, np.int64(1), -0.0, 0.0)}
    assert len(keys) == 6
    assert fingerprint(lambda b: sma(b.close, 5)) != fingerprint(lambda b: sma(b.open, 5))
    assert fingerprint(functools.partial(sma, period=5)) == fingerprint(functools.partial(sma, period=5))
    assert fingerprint(functools.partial(sma, period=5)) != fingerprint(functools.partial(sma, period=6))

    def scaled(b):
        return b.close * SCALE

    def from_module(b):
        return sma(b.close, HELPERS.period)

    class Settings:
        period = 5

    def from_class(b):
        return sma(b.close, Settings.period)

    global SCALE
    functions = (scaled, from_module, from_class, _own_attribute)
    before = [fingerprint(f) for f in functions]
    old = SCALE
    try:
        SCALE, HELPERS.period, Settings.period, _own_attribute.period = 3.0, 6, 7, 8
        after = [fingerprint(f) for f in functions]
    finally:
        SCALE, HELPERS.period, _own_attribute.period = old, 5, 5
    assert all(a is not None and b is not None and a != b for a, b in zip(before, after, strict=True))


def test_a_function_whose_result_may_depend_on_hidden_state_is_never_kept():
    class EA:
        period = 5

        def line(self, b):
            return sma(b.close, self.period)

    ea, window, table = EA(), [5], {"period": 5}
    hidden = (
        ea.line,  # a bound method: the EA's state
        lambda b: sma(b.close, ea.period),  # a closure over an object
        lambda b: sma(b.close, window[0]),  # over a list
        lambda b: sma(b.close, table["period"]),  # over a dict
        lambda b: sma(b.close, ARRAY[0]),  # a global array
    )
    assert [fingerprint(fn) for fn in hidden] == [None] * 5
    assert fingerprint(lambda b: b.close * np.ones(len(b.close))) is not None  # np, len: by identity


def test_bars_are_known_by_their_content_not_their_frame():
    meta = meta_of(DF)
    first = digest(BarFeed.from_frame(DF, meta))
    assert digest(BarFeed.from_frame(DF.copy(), meta)) == first
    for column in ("open", "tick_volume", "spread", "real_volume"):
        changed = DF.copy()
        changed.iloc[200, changed.columns.get_loc(column)] += 1
        assert digest(BarFeed.from_frame(changed, meta)) != first, column
    shifted = DF.copy()
    shifted.index = shifted.index + pd.Timedelta(hours=1)
    assert digest(BarFeed.from_frame(shifted, meta)) != first
    assert digest(BarFeed.from_frame(DF.iloc[:-1], meta)) != first


def test_an_identical_request_gets_the_kept_values_read_only_and_nothing_else_does():
    cache, calls = ProvenIndicators(), []

    def prove(fn, feed, name, probes):
        calls.append((name, tuple(probes)))
        return causal_indicator(fn, feed, name, probes)

    feed = BarFeed.from_frame(DF, meta_of(DF))
    first = cache.proved(_window(5), feed, "a", [100, 200], prove)
    again = cache.proved(_window(5), BarFeed.from_frame(DF.copy(), meta_of(DF)), "b", [100, 200], prove)
    assert len(calls) == 1 and cache.hits == 1
    np.testing.assert_array_equal(first, again)
    with pytest.raises(ValueError, match="read-only"):
        again[:] = 0.0  # no caller writes the kept values: they stay as proved
    with pytest.raises(ValueError, match="read-only"):
        first[:] = 0.0  # nor the values of the proof itself, which are the kept ones
    for values in (again, again.base):  # not even made writeable again through the array or its base
        with pytest.raises(ValueError, match="WRITEABLE"):
            values.flags.writeable = True
    np.testing.assert_array_equal(cache.proved(_window(5), feed, "c", [100, 200], prove), first)
    cache.proved(_window(5), feed, "d", [100, 300], prove)  # other probe points: proved again
    cache.proved(_window(6), feed, "e", [100, 200], prove)
    cache.proved(lambda b: sma(b.close, [5][0]), feed, "f", [100, 200], prove)  # not kept
    cache.proved(lambda b: sma(b.close, [5][0]), feed, "g", [100, 200], prove)
    assert [c[0] for c in calls] == ["a", "d", "e", "f", "g"]


def test_a_failed_proof_is_never_kept():
    cache, calls = ProvenIndicators(), []

    def prove(fn, feed, name, probes):
        calls.append(name)
        return causal_indicator(fn, feed, name, probes)

    feed = BarFeed.from_frame(DF, meta_of(DF))
    for _ in range(3):
        with pytest.raises(LookAheadError, match="'peek' looks ahead"):
            cache.proved(lambda b: _lead(b.close, 1), feed, "peek", [100, 200], prove)
    assert calls == ["peek"] * 3 and cache.hits == 0


def test_the_kept_values_stay_within_their_budget():
    cache = ProvenIndicators(budget=4 * DF.shape[0] * 8)  # room for four lines of the history
    feed = BarFeed.from_frame(DF, meta_of(DF))
    for period in range(2, 12):
        cache.proved(_window(period), feed, "w", [100], causal_indicator)
    assert len(cache._kept) == 4 and cache._size <= cache.budget
    cache.proved(_window(11), feed, "w", [100], causal_indicator)  # the newest are kept
    assert cache.hits == 1


def test_the_kept_proofs_stay_within_their_count():
    cache = ProvenIndicators(entries=3)
    feed = BarFeed.from_frame(DF, meta_of(DF))
    for period in range(2, 8):
        cache.proved(_window(period), feed, "w", [100], causal_indicator)
    assert len(cache._kept) == 3


def test_threads_sharing_the_kept_proofs_each_get_their_own_function_s_values():
    """A Dask worker runs several passes at once on threads: each gets the values of its own function."""
    from concurrent.futures import ThreadPoolExecutor

    cache = ProvenIndicators(entries=5)  # small: proofs are dropped while others are read
    meta = meta_of(DF)
    expected = {
        p: causal_indicator(_window(p), BarFeed.from_frame(DF, meta), "w", [100]) for p in range(2, 12)
    }

    def one(k: int) -> bool:
        period = 2 + k % 10
        got = cache.proved(_window(period), BarFeed.from_frame(DF, meta), "w", [100], causal_indicator)
        return np.array_equal(got, expected[period], equal_nan=True)

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, range(200)))
    assert cache.hits > 0


def test_candles_changed_in_place_between_runs_are_new_bars():
    """The bars are known by their content: a frame edited in place after a run is not served the first
    run's indicator values."""
    frame = DF.copy()
    first = Backtest(frame, SmaCrossEA, forward=None).run(fast=3, slow=9)
    frame.loc[frame.index[150:], "close"] += 0.01  # the same frame object, other closes
    changed = Backtest(frame, SmaCrossEA, forward=None).run(fast=3, slow=9)
    PROVEN.clear()
    fresh = Backtest(frame, SmaCrossEA, forward=None).run(fast=3, slow=9)
    pd.testing.assert_series_equal(changed.stats, fresh.stats)
    assert changed.stats["total_net_profit"] != first.stats["total_net_profit"]


def test_a_backtest_gives_the_same_figures_from_kept_proofs():
    bt = Backtest(DF, SmaCrossEA, forward="1/3")
    cold = bt.run(fast=4, slow=30)
    hits = PROVEN.hits
    warm = bt.run(fast=4, slow=30)
    assert PROVEN.hits == hits + 2
    pd.testing.assert_series_equal(warm.stats, cold.stats)
    pd.testing.assert_frame_equal(warm.trades, cold.trades)
    pd.testing.assert_frame_equal(warm.equity, cold.equity)


class Shifted(ExpertAdvisor):
    """Trades on a line of closes moved ``shift`` bars: later (honest) or earlier (a look at the future)."""

    shift: int = -1
    lots: float = 0.1
    order: list[int] = []  # noqa: RUF012 - the shifts in the order their passes ran (this process)

    def on_init(self) -> None:
        type(self).order.append(self.shift)
        shift = self.shift
        self.line = self.indicator(lambda b: _lead(b.close, shift), f"lead{shift}")

    def on_bar(self) -> None:
        if len(self.bars) > 2 and self.line[-1] > self.bars.close[-1]:
            self.close()
            self.buy(self.lots)
        elif len(self.bars) > 2:
            self.close()
            self.sell(self.lots)


class Turncoat(ExpertAdvisor):
    """Honest in its first passes, then peeking through state its indicator reads (a class attribute
    counted up by each pass's ``on_init``): the same parameters, another function."""

    period: int = 3
    runs = 0

    def on_init(self) -> None:
        type(self).runs += 1
        period = self.period
        self.line = self.indicator(lambda b: _lead(b.close, 1 if Turncoat.runs > 2 else -period), "turncoat")

    def on_bar(self) -> None:
        pass


def test_a_look_ahead_is_caught_in_an_optimisation_pass_after_the_first():
    """Passes that repeat an honest line reuse its proof; the passes whose line peeks, run after honest
    ones with the same function, are refused as look-aheads, in this process and in a worker process."""
    space = {"shift": [-3, -2, -1, 1, 2], "lots": [0.1, 0.2]}
    Shifted.order = []
    inline = optimize(DF, Shifted, space, workers=0).sort_values("pass")
    assert Shifted.order[0] < 0 and len(Shifted.order) == 10  # an honest pass ran first
    assert PROVEN.hits > 0
    pooled = optimize(DF, Shifted, space, workers=1).sort_values("pass")
    for table in (inline, pooled):
        for row in table.itertuples():
            if row.shift > 0:
                assert isinstance(row.error, str) and np.isnan(row.criterion), row
                assert row.error.startswith(f"LookAheadError: indicator 'lead{row.shift}' looks ahead"), row
            else:
                full = Backtest(DF, Shifted, forward=None).run(shift=row.shift, lots=row.lots)
                assert not isinstance(row.error, str) and row.criterion == full.stats["final_balance"], row
    pd.testing.assert_frame_equal(inline.drop(columns="seconds"), pooled.drop(columns="seconds"))


def test_an_indicator_that_turns_to_peeking_through_state_it_reads_is_caught():
    Turncoat.runs = 0
    table = optimize(DF, Turncoat, {"period": [3]}, workers=0)
    assert table["error"].isna().all()
    bt = Backtest(DF, Turncoat, forward=None)
    bt.run()  # the second run, honest: its proof is kept under Turncoat.runs == 2
    with pytest.raises(LookAheadError, match="'turncoat' looks ahead"):
        bt.run()
    with pytest.raises(LookAheadError, match="'turncoat' looks ahead"):
        bt.run()


SHIFT_READ_BY_A_HELPER = -1  # a global that the helper below reads and ``Helped.on_init`` sets


def _moved_by_the_global(b):
    """A module's helper: the closes moved by a global it reads (its caller's code does not name it)."""
    return _lead(b.close, SHIFT_READ_BY_A_HELPER)


class _StaticHelpers:
    @staticmethod
    def moved(b):
        return _lead(b.close, SHIFT_READ_BY_A_HELPER)


class Helped(ExpertAdvisor):
    """Its indicator calls a helper whose shift a global holds, set here from the pass's parameter."""

    shift: int = -1

    def on_init(self) -> None:
        global SHIFT_READ_BY_A_HELPER
        SHIFT_READ_BY_A_HELPER = self.shift
        self.line = self.indicator(lambda b: _moved_by_the_global(b) * 1.0, "helped")

    def on_bar(self) -> None:
        if len(self.bars) > 2 and self.line[-1] > self.bars.close[-1]:
            self.close()
            self.buy(0.1)
        elif len(self.bars) > 2:
            self.close()
            self.sell(0.1)


def test_a_helper_s_own_globals_are_part_of_its_caller_s_key():
    """A helper reached by a global name, as a module's attribute or as a class's static method is known
    by what it reads, not by its identity: a global it reads changed between passes is another function."""
    global SHIFT_READ_BY_A_HELPER
    HELPERS.moved = _moved_by_the_global
    callers = (
        lambda b: _moved_by_the_global(b),
        lambda b: HELPERS.moved(b),
        lambda b: _StaticHelpers.moved(b),
    )
    try:
        SHIFT_READ_BY_A_HELPER = -1
        before = [fingerprint(f) for f in callers]
        SHIFT_READ_BY_A_HELPER = -2
        after = [fingerprint(f) for f in callers]
    finally:
        SHIFT_READ_BY_A_HELPER = -1
        del HELPERS.moved
    assert all(a is not None and b is not None and a != b for a, b in zip(before, after, strict=True))


def test_a_pass_whose_helper_reads_another_global_is_not_served_the_earlier_pass_s_values():
    """The second pass's line is its own (closes two bars back), not the first pass's (one bar back):
    the same figures as that pass run alone."""
    bt = Backtest(DF, Helped, forward=None)
    bt.run(shift=-1)
    warm = bt.run(shift=-2)
    PROVEN.clear()
    alone = Backtest(DF, Helped, forward=None).run(shift=-2)
    pd.testing.assert_series_equal(warm.stats, alone.stats)
    pd.testing.assert_frame_equal(warm.trades, alone.trades)


def test_a_look_ahead_through_a_helper_is_caught_after_an_honest_pass():
    """A pass whose helper peeks (a positive shift), run after an honest pass with the same code, is
    refused as a look-ahead: in one process, in the optimiser inline and in its worker pool."""
    bt = Backtest(DF, Helped, forward=None)
    bt.run(shift=-1)
    with pytest.raises(LookAheadError, match="'helped' looks ahead"):
        bt.run(shift=1)
    for workers in (0, 1):
        PROVEN.clear()
        table = optimize(DF, Helped, {"shift": [-1, 1]}, workers=workers).set_index("shift")
        assert not isinstance(table.loc[-1, "error"], str)
        error = str(table.loc[1, "error"])
        assert error.startswith("LookAheadError: indicator 'helped' looks ahead"), workers


def test_a_function_reading_state_by_a_name_its_code_does_not_spell_is_never_kept(tmp_path):
    """``getattr(Settings, "period")`` reads an attribute whose name is a string, not a name of the code:
    a period set on the class between passes would be unseen by the key, so such a function is proved in
    every call, as are those reading a file, the environment or their globals by name."""
    import builtins
    import os

    class Settings:
        period = 5

    path = tmp_path / "period.txt"
    path.write_text("5")
    opaque = (
        lambda b: sma(b.close, getattr(Settings, "period")),  # noqa: B009 - the attack itself
        lambda b: sma(b.close, vars(Settings)["period"]),
        lambda b: sma(b.close, int(open(path).read())),  # noqa: SIM115
        lambda b: sma(b.close, int(os.getenv("PERIOD", "5"))),
        lambda b: sma(b.close, globals()["HELPERS"].period),
        lambda b: sma(b.close, eval("HELPERS.period")),
        lambda b: sma(b.close, builtins.getattr(Settings, "period")),  # noqa: B009
    )
    assert [fingerprint(fn) for fn in opaque] == [None] * len(opaque)
    cache, calls = ProvenIndicators(), []

    def prove(fn, feed, name, probes):
        calls.append(name)
        return causal_indicator(fn, feed, name, probes)

    feed = BarFeed.from_frame(DF, meta_of(DF))
    first = cache.proved(opaque[0], feed, "p", [100], prove)
    Settings.period = 6
    second = cache.proved(opaque[0], feed, "p", [100], prove)
    assert calls == ["p", "p"]
    np.testing.assert_array_equal(second, sma(DF["close"].to_numpy(), 6))
    assert not np.array_equal(first, second, equal_nan=True)


def _highest_within(window):
    """The highest close of the bars within ``window`` (a NumPy time span) up to each bar."""
    return lambda b: pd.Series(b.close, index=b.time).rolling(pd.Timedelta(window)).max().to_numpy()


def test_time_spans_of_other_units_are_other_inputs():
    """``np.timedelta64(3, 'h')`` and ``np.timedelta64(3, 'D')`` hold the same integer: a window of three
    days is not served the values of a window of three hours (nor dates of other units each other's)."""
    assert fingerprint(_highest_within(np.timedelta64(3, "h"))) != fingerprint(
        _highest_within(np.timedelta64(3, "D"))
    )
    assert fingerprint(_window(np.datetime64(5, "s"))) != fingerprint(_window(np.datetime64(5, "D")))
    feed = BarFeed.from_frame(DF, meta_of(DF))
    hours = PROVEN.proved(_highest_within(np.timedelta64(3, "h")), feed, "hi", [100], causal_indicator)
    days = PROVEN.proved(_highest_within(np.timedelta64(3, "D")), feed, "hi", [100], causal_indicator)
    expected = DF["close"].rolling(pd.Timedelta(days=3)).max().to_numpy()
    np.testing.assert_array_equal(days, expected)
    assert not np.array_equal(hours, days)


def test_an_attribute_of_a_class_or_module_reached_through_a_module_is_part_of_the_key():
    """``HELPERS.Settings.period``, ``HELPERS.inner.period`` and ``HELPERS.line.period``: the period read
    two steps away from the global changes the key as one step away does."""

    class Settings:
        period = 5

    def line(b):
        return b.close

    inner = types.ModuleType("inner")
    inner.period = line.period = 5
    HELPERS.Settings, HELPERS.inner, HELPERS.line = Settings, inner, line
    callers = (
        lambda b: sma(b.close, HELPERS.Settings.period),
        lambda b: sma(b.close, HELPERS.inner.period),
        lambda b: sma(b.close, HELPERS.line.period),
    )
    try:
        before = [fingerprint(f) for f in callers]
        Settings.period = inner.period = line.period = 6
        after = [fingerprint(f) for f in callers]
        feed = BarFeed.from_frame(DF, meta_of(DF))
        got = PROVEN.proved(callers[0], feed, "s", [100], causal_indicator)
        Settings.period = 7
        np.testing.assert_array_equal(
            PROVEN.proved(callers[0], feed, "s", [100], causal_indicator), sma(DF["close"].to_numpy(), 7)
        )
        np.testing.assert_array_equal(got, sma(DF["close"].to_numpy(), 6))
    finally:
        del HELPERS.Settings, HELPERS.inner, HELPERS.line
    assert all(a is not None and b is not None and a != b for a, b in zip(before, after, strict=True))


def test_a_library_s_functions_are_known_by_identity_and_the_environment_s_reader_is_never_kept():
    """``pandas.concat`` or ``numpy.full`` called by name is as pure as a builtin: an indicator calling one is
    kept (its proof is reused); ``os.getenv`` reads a variable named in a string and is not."""
    import os

    from numpy import full
    from pandas import concat

    kept = (
        lambda b: concat([pd.Series(b.close)]).to_numpy(),
        lambda b: full(len(b.close), 1.0),
        functools.partial(concat, ignore_index=True),
    )
    assert all(fingerprint(fn) is not None for fn in kept)
    cache, calls = ProvenIndicators(), []

    def prove(fn, feed, name, probes):
        calls.append(name)
        return causal_indicator(fn, feed, name, probes)

    feed = BarFeed.from_frame(DF, meta_of(DF))
    for _ in range(2):
        cache.proved(lambda b: concat([pd.Series(b.close)]).to_numpy(), feed, "concat", [100], prove)
    assert calls == ["concat"]
    assert fingerprint(lambda b: sma(b.close, int(os.getenv("PERIOD", "5")))) is None
    assert fingerprint(lambda b: sma(b.close, int(os.environ.get("PERIOD", "5")))) is None


def test_a_walk_forward_whose_helper_reads_the_pass_s_global_picks_from_each_pass_s_own_line(monkeypatch):
    """Each window's passes (shifts 1, 2 and 3 bars back, set through the helper's global) are scored on
    their own lines, inline and in the worker pool: the windows equal those of a run that keeps no proof.
    Served the first pass's line, every pass scored alike and the first shift won each window."""
    from backtests import replay
    from backtests.optimize import walk_forward

    def windows(workers: int) -> pd.DataFrame:
        return walk_forward(DF, Helped, {"shift": [-1, -2, -3]}, 200, 100, workers=workers).windows

    kept = [windows(0), windows(1)]
    monkeypatch.setattr(replay, "PROVEN", ProvenIndicators(budget=0))
    proved = windows(0)
    assert proved["shift"].nunique() > 1 or set(proved["shift"]) != {-1}
    for table in kept:
        pd.testing.assert_frame_equal(
            table.drop(columns="seconds", errors="ignore"),
            proved.drop(columns="seconds", errors="ignore"),
            check_exact=True,
        )


class _FileSignal(ExpertAdvisor):
    """Long while the signal a file holds (one value a bar, ``np.load``) is positive, short while negative."""

    path: str = ""

    def on_init(self):
        path = self.path
        self.signal = self.indicator(lambda b: np.load(path)[: len(b.close)], "signal")

    def on_bar(self):
        s = self.signal[-1]
        if s > 0 and self.position <= 0:
            self.close()
            self.buy(0.1)
        elif s < 0 and self.position >= 0:
            self.close()
            self.sell(0.1)


def test_an_indicator_reading_a_file_rewritten_between_runs_is_given_the_new_file(tmp_path):
    """A signal file written again between two runs in one process (a notebook's next model) is a new
    input: the second run trades the new signal, as a fresh process does. Kept by its code alone, it was
    served the first file's values and repeated the first run's figures."""
    path = tmp_path / "signal.npy"
    bars = DF.iloc[:400]
    wave = np.where(np.arange(len(bars)) % 20 < 10, 1.0, -1.0)
    np.save(path, wave)
    first = Backtest(bars, _FileSignal, forward=None).run(path=str(path))
    np.save(path, -wave)
    second = Backtest(bars, _FileSignal, forward=None).run(path=str(path))
    PROVEN.clear()  # as a fresh process
    fresh = Backtest(bars, _FileSignal, forward=None).run(path=str(path))
    assert first.stats["total_trades"] > 2
    assert second.stats["total_net_profit"] == fresh.stats["total_net_profit"]
    assert list(second.trades["type"]) == list(fresh.trades["type"]) != list(first.trades["type"])


def test_the_file_readers_of_numpy_pandas_and_python_are_read_in_every_call(tmp_path):
    """NumPy's and pandas' loaders, ``pathlib.Path`` and SQLite read a file named by a path, whose content
    the key cannot see: an indicator calling one is never kept, as one calling ``open`` is not."""
    import pathlib
    import sqlite3

    from numpy import load

    path = str(tmp_path / "x.npy")
    readers = (
        lambda b: np.load(path),
        lambda b: load(path),
        lambda b: np.loadtxt(path),
        lambda b: np.genfromtxt(path),
        lambda b: np.fromfile(path),
        lambda b: np.memmap(path),
        lambda b: pd.read_csv(path)["x"].to_numpy(),
        lambda b: pd.read_parquet(path)["x"].to_numpy(),
        lambda b: np.asarray(pathlib.Path(path).read_text().split(), dtype=float),
        lambda b: np.asarray(sqlite3.connect(path).execute("select x from t").fetchall()),
    )
    assert [fingerprint(fn) for fn in readers] == [None] * len(readers)


def test_a_line_reads_the_proved_values_without_a_copy_and_copies_anything_writeable():
    from backtests.indicator_cache import frozen
    from strategies.bars import BarFeed, Line

    feed = BarFeed.from_frame(DF, meta_of(DF), visible=10)
    proved = frozen(np.arange(len(DF), dtype=np.float64))
    line = Line(proved, feed.bars, "proved")
    assert np.shares_memory(line._values, proved)  # one array for every run's line
    mine = np.arange(len(DF), dtype=np.float64)
    other = Line(mine, feed.bars, "mine")
    mine[:] = -1.0  # the caller writes its own array: the line keeps what it was given
    assert not np.shares_memory(other._values, mine) and other[-1] == 9.0
    readonly_view = mine.view()
    readonly_view.flags.writeable = False  # read-only, but its owner can still write it: copied
    assert not np.shares_memory(Line(readonly_view, feed.bars, "view")._values, mine)
    assert line[-1] == 9.0
    with pytest.raises(IndexError):
        line[10]  # a view of the whole history still reads the closed bars only
