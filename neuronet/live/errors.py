"""Errors of live trading a user can fix: a journal that cannot be read or resumed, a bad live setting."""

from __future__ import annotations

from neuronet.errors import NeuronetError


class LiveError(NeuronetError, ValueError):
    """A live run cannot start or go on as asked (a setting, a terminal answer, a mismatched journal)."""


class JournalError(LiveError):
    """A journal file is not one neuronet wrote, is damaged, or belongs to another run; names the line."""
