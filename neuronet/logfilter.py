"""The console's log lines: warnings and errors only (no library's INFO chatter), and a warning that every
pass or retraining repeats word for word shown once.

An optimisation runs hundreds of passes and a walk-forward retrains dozens of times; a warning about the
EA's settings (FractalEA's "validation holds out no row") is the same at each, and printing it hundreds of
times hides every other line. The first is shown, and its first repeat with a note that further ones are
not; ``--debug`` shows them all.
"""

from __future__ import annotations

import logging


class OncePerMessage(logging.Filter):
    """Pass a WARNING (or higher) record the first time its logger, level and text are seen, and its
    first repeat marked as such; later copies are dropped and counted (``repeats``). Records below
    WARNING always pass."""

    def __init__(self) -> None:
        super().__init__()
        self.repeats: dict[tuple[str, int, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        seen = self.repeats.get(key)
        self.repeats[key] = 0 if seen is None else seen + 1
        if seen is None:
            return True
        if seen == 0:
            record.msg, record.args = f"{key[2]} (again; further repeats are not shown)", None
            return True
        return False


def install(debug: bool) -> None:
    """Configure the root logger for the console: WARNING and up (DEBUG with ``debug``), each repeated
    warning once unless ``debug``. Safe to call again (a second command in one process)."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        # A library that sets its own loggers to INFO (Dask's scheduler and workers announce themselves in
        # a dozen lines) would otherwise reach the console through the root handler.
        handler.setLevel(logging.DEBUG if debug else logging.WARNING)
        present = [f for f in handler.filters if isinstance(f, OncePerMessage)]
        for f in present:
            handler.removeFilter(f)  # a fresh count per command
        if not debug:
            handler.addFilter(OncePerMessage())
