"""An EA's own failures name the EA, hook and bar; Ctrl-C keeps each phase's time and marks the model."""

import time

import numpy as np
import pandas as pd
import pytest

import nn
from backtests import Backtest, EARuntimeError, LookAheadError
from backtests.replay import IndicatorError
from datafeeds import CandleMeta, Timeframe, make_frame
from neuronet.errors import NeuronetError
from strategies import EAError, ExpertAdvisor


def candles(n=300, seed=2):
    rng = np.random.default_rng(seed)
    close = 1.1 + np.cumsum(rng.normal(0, 5e-4, n))
    data = {"open": close, "high": close + 2e-4, "low": close - 2e-4, "close": close, "spread": np.full(n, 5)}
    index = pd.date_range("2021-03-01", periods=n, freq="h", tz="UTC")
    data.update({k: np.round(data[k], 5) for k in ("open", "high", "low", "close")})  # 5-digit prices
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5, source="test"))


DF = candles()
FS = 200  # forward="1/3" starts here


def _raiser(hook, exc):
    def fail(self, *args):
        raise exc

    return type("Broken", (ExpertAdvisor,), {hook: property(fail) if hook == "describe" else fail})


@pytest.mark.parametrize(
    ("hook", "where", "bar"),
    [
        ("on_init", "before the first bar", None),
        ("on_study", f"before bar {FS} ({DF.index[FS]})", FS),
        ("on_bar", f"at bar {FS} ({DF.index[FS]})", FS),
        ("on_deinit", f"after bar 299 ({DF.index[299]})", 299),
        ("on_tester", "after the run", None),
        ("evaluate_predictions", "after the run", None),
        ("report_section", "after the run", None),
        ("describe", "after the run", None),
    ],
)
def test_whatever_a_hook_raises_names_the_ea_hook_and_bar(hook, where, bar):
    with pytest.raises(EARuntimeError) as info:
        Backtest(DF, _raiser(hook, KeyError("missing")), forward="1/3").run()
    exc = info.value
    assert str(exc) == f"Broken.{hook} raised {where}: KeyError: 'missing'"
    assert (exc.ea, exc.hook, exc.bar) == ("Broken", hook, bar)
    assert isinstance(exc.original, KeyError) and exc.__cause__ is exc.original
    assert not isinstance(exc, NeuronetError | ValueError)  # an EA's bug is not the user's input error


def test_system_exit_from_an_ea_does_not_end_the_program():
    with pytest.raises(EARuntimeError, match=r"on_bar raised at bar 200 .*SystemExit: 3"):
        Backtest(DF, _raiser("on_bar", SystemExit(3)), forward="1/3").run()


def test_an_ea_error_from_on_init_is_the_users_parameter_error():
    """``on_init`` rejects parameters with EAError: that reaches the caller as it is (a user error)."""
    with pytest.raises(EAError, match="bad lots") as info:
        Backtest(DF, _raiser("on_init", EAError("bad lots")), forward="1/3").run()
    assert not isinstance(info.value, EARuntimeError)
    with pytest.raises(EARuntimeError, match=r"on_study raised.*EAError: bad lots"):
        Backtest(DF, _raiser("on_study", EAError("bad lots")), forward="1/3").run()


def test_a_broken_constructor_is_the_eas_failure():
    class Ctor(ExpertAdvisor):
        def __init__(self, **params):
            super().__init__(**params)
            raise RuntimeError("oops")

    with pytest.raises(EARuntimeError, match=r"Ctor.__init__ raised before the first bar: RuntimeError"):
        Backtest(DF, Ctor, forward="1/3").run()


@pytest.mark.parametrize(
    ("fn", "error", "message"),
    [
        (lambda b: np.append(b.close, 1.0), IndicatorError, r"returned shape \(301,\) for 300 bars"),
        (lambda b: 1.0, IndicatorError, r"returned shape \(\) for 300 bars"),
        (lambda b: ["x"] * len(b), IndicatorError, "returned list, not numbers"),
        (lambda b: b.window(0, len(b) + 1).close, EAError, "cannot reach past the newest closed bar"),
        (lambda b: np.append(b.close[1:], np.nan), LookAheadError, "looks ahead"),
        (lambda b: 1 / 0, EARuntimeError, "on_init raised before the first bar: ZeroDivisionError"),
    ],
    ids=["longer", "scalar", "strings", "window-past-end", "shifted", "raises"],
)
def test_bad_indicator_functions(fn, error, message):
    class Ind(ExpertAdvisor):
        def on_init(self):
            self.indicator(fn, "x")

    with pytest.raises(error, match=message):
        Backtest(DF, Ind, forward="1/3").run()


def test_an_indicator_returning_its_own_bars_keeps_its_values():
    """The harness copies an indicator's output before blanking the bars the function was given."""

    class Same(ExpertAdvisor):
        def on_init(self):
            self.line = self.indicator(lambda b: b.close, "close")

        def on_bar(self):
            assert self.line[-1] == self.bars.close[-1]

    Backtest(DF, Same, forward="1/3").run()


class _Sleeper(ExpertAdvisor):
    """Trains for 0.2 s, then Ctrl-C arrives where ``stop`` says."""

    stop: str = "study"
    retrain_every: int = 0

    def on_study(self, bars):
        time.sleep(0.2)
        if self.stop == "study" or (self.stop == "retrain" and len(self.bars) > FS):
            raise KeyboardInterrupt

    def on_bar(self):
        if self.stop == "bar" and len(self.bars) == FS + 10:
            raise KeyboardInterrupt


def test_ctrl_c_while_training_is_not_counted_as_replay():
    result = Backtest(DF, _Sleeper, forward="1/3").run(stop="study")
    assert not result.complete and result.interrupted == "on_study"
    assert result.timings["study_s"] >= 0.2 and "replay_s" not in result.timings
    assert result.ea_instance.model_metadata()["run"] == {"complete": False, "interrupted": "on_study"}


def test_ctrl_c_while_retraining_keeps_the_training_time_apart():
    result = Backtest(DF, _Sleeper, forward="1/3").run(stop="retrain", retrain_every=20)
    assert result.interrupted == "replay" and len(result.equity) == 21
    assert result.timings["retrain_s"] >= 0.2 and result.timings["replay_s"] < 0.2


def test_ctrl_c_in_the_bar_loop_and_a_complete_run():
    result = Backtest(DF, _Sleeper, forward="1/3").run(stop="bar")
    assert result.interrupted == "replay" and result.timings["study_s"] >= 0.2
    assert result.timings["replay_s"] < 0.2 and len(result.equity) == 11
    done = Backtest(DF, _Sleeper, forward="1/3").run(
        stop="never", retrain_every=40
    )  # retrains at bars 240 and 280
    assert done.complete and done.interrupted is None
    assert done.timings["retrain_s"] >= 0.4 and done.timings["replay_s"] < 0.2
    assert done.ea_instance.model_metadata()["run"] == {"complete": True, "interrupted": None}


def test_an_interrupted_runs_model_file_says_so(tmp_path):
    class Saver(_Sleeper):
        def save_model(self, path):
            model = nn.Sequential([nn.Dense(1)], input_shape=(2,), backend="numpy")
            return str(nn.save(model, f"{path}.nnz", self.model_metadata()))

    result = Backtest(DF, Saver, forward="1/3").run(stop="study")
    written = result.ea_instance.save_model(str(tmp_path / "model"))
    meta = nn.load(written).metadata
    assert meta["run"] == {"complete": False, "interrupted": "on_study"} and meta["ea"] == "Saver"


def test_on_tester_cannot_rewrite_the_reported_statistics():
    class Liar(ExpertAdvisor):
        def on_tester(self, stats):
            stats["total_net_profit"] = 1e9
            return 1

    result = Backtest(DF, Liar, forward="1/3").run()
    assert result.stats["total_net_profit"] == 0 and result.custom_criterion == 1.0


@pytest.mark.parametrize(
    ("hook", "value", "message"),
    [
        ("on_tester", "good", r"Bad.on_tester raised after the run: TypeError: returned 'good', not a"),
        ("evaluate_predictions", [1, 2], r"evaluate_predictions raised after the run: TypeError: .*list"),
        ("evaluate_predictions", {"y_true": []}, r"returned dict, not a dict with \['classes'"),
    ],
)
def test_malformed_hook_results_are_the_eas_failure(hook, value, message):
    Bad = type("Bad", (ExpertAdvisor,), {hook: lambda self, arg: value})
    with pytest.raises(EARuntimeError, match=message):
        Backtest(DF, Bad, forward="1/3").run()


def test_any_base_exception_from_an_ea_is_wrapped_but_ctrl_c():
    class Odd(BaseException):
        pass

    with pytest.raises(EARuntimeError, match=r"on_bar raised at bar 200 .*Odd: x"):
        Backtest(DF, _raiser("on_bar", Odd("x")), forward="1/3").run()


def test_an_ea_failure_survives_pickling():
    """A run in another process (a Dask worker) hands the failure back whole."""
    import pickle

    with pytest.raises(EARuntimeError) as info:
        Backtest(DF, _raiser("on_bar", KeyError("missing")), forward="1/3").run()
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)
    assert (again.hook, again.bar, again.time) == ("on_bar", FS, DF.index[FS])
    assert isinstance(again.original, KeyError)


def test_ctrl_c_in_on_init_keeps_a_result_with_no_training():
    result = Backtest(DF, _raiser("on_init", KeyboardInterrupt()), forward="1/3").run()
    assert result.interrupted == "on_init" and not result.complete
    assert "init_s" in result.timings and "study_s" not in result.timings and "replay_s" not in result.timings


def test_a_failing_save_model_names_the_ea_and_hook(tmp_path):
    from backtests.report import write_report

    result = Backtest(DF, _raiser("save_model", OSError("disk full")), forward="1/3").run()
    with pytest.raises(EARuntimeError) as info:
        write_report(result, tmp_path / "report")
    exc = info.value
    assert (exc.ea, exc.hook) == ("Broken", "save_model")
    assert str(exc) == "Broken.save_model raised after the run, saving its model: OSError: disk full"
