"""The console's log lines: a warning that every pass or retraining repeats word for word is shown once.

An optimisation runs hundreds of passes and a walk-forward retrains dozens of times; a warning about the
EA's settings (FractalEA's "validation holds out no row") is the same at each, and printing it hundreds of
times hides every other line. The first is shown with a note that repeats are held back; ``--debug`` shows
them all.
"""

from __future__ import annotations

import logging


class OncePerMessage(logging.Filter):
    """Pass a WARNING (or higher) record the first time its logger, level and text are seen; later copies
    are dropped and counted (``repeats``). Records below WARNING always pass."""

    def __init__(self) -> None:
        super().__init__()
        self.repeats: dict[tuple[str, int, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        if key in self.repeats:
            self.repeats[key] += 1
            return False
        self.repeats[key] = 0
        record.msg, record.args = f"{key[2]} (shown once; later repeats are held back)", None
        return True


def install(debug: bool) -> None:
    """Configure the root logger for the console: WARNING and up (DEBUG with ``debug``), each repeated
    warning once unless ``debug``. Safe to call again (a second command in one process)."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        present = [f for f in handler.filters if isinstance(f, OncePerMessage)]
        for f in present:
            handler.removeFilter(f)  # a fresh count per command
        if not debug:
            handler.addFilter(OncePerMessage())
