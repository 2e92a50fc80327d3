"""A warning repeated by every pass or retraining reaches the console once; --debug shows every copy."""

import io
import logging

from neuronet import logfilter


def _console(debug: bool):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    root.handlers[:] = [logging.StreamHandler(stream)]
    logfilter.install(debug)
    return stream, saved


def _restore(saved):
    root = logging.getLogger()
    root.handlers[:], level = saved
    root.setLevel(level)


def test_a_repeated_warning_is_shown_once_and_others_still_pass():
    stream, saved = _console(debug=False)
    try:
        log = logging.getLogger("strategies.fractal")
        for _ in range(50):  # once per retraining
            log.warning("FractalEA: validation=%s holds out no row; training without it", 0.001)
        log.warning("another warning")
        log.error("another warning")  # another level: its own line
    finally:
        _restore(saved)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "FractalEA: validation=0.001 holds out no row; training without it",
        "FractalEA: validation=0.001 holds out no row; training without it (again; further repeats are not "
        "shown)",
        "another warning",
        "another warning",
    ]


def test_debug_shows_every_copy():
    stream, saved = _console(debug=True)
    try:
        for _ in range(3):
            logging.getLogger("x").warning("same")
    finally:
        _restore(saved)
    assert stream.getvalue().splitlines() == ["same"] * 3


def test_a_library_that_sets_its_loggers_to_info_stays_off_the_console():
    stream, saved = _console(debug=False)
    chatty = logging.getLogger("distributed.scheduler")
    level = chatty.level
    chatty.setLevel(logging.INFO)  # as Dask configures its loggers
    try:
        chatty.info("State start")
        chatty.warning("a worker died")
    finally:
        chatty.setLevel(level)
        _restore(saved)
    assert stream.getvalue().splitlines() == ["a worker died"]
