"""Errors of ``nn`` that the caller can fix: a setting out of range, an argument of the wrong kind, data
that does not fit the model. Each derives from ``neuronet.errors.NeuronetError`` (so the command line prints
it as one line) and from the built-in family that callers caught before (``ValueError``, ``TypeError``).

Built-in ``ValueError``/``TypeError`` stay for invariants that only a bug in ``nn`` itself can break (a
kernel fed buffers of different sizes by our own code); ``tests/test_errors.py`` keeps the two apart.
"""

from __future__ import annotations

from neuronet.errors import NeuronetError


class NNConfigError(NeuronetError, ValueError):
    """A setting outside its range or an unknown name: a layer description, a model's sizes, an optimizer,
    a loss, a schedule, a callback, a backend or device name, a ``fit`` argument."""


class NNTypeError(NeuronetError, TypeError):
    """An argument of the wrong kind (a layer that is not a ``Layer``, a model kind the file format does not
    store)."""


class NNDataError(NeuronetError, ValueError):
    """Arrays that do not fit the model: wrong shapes, no rows, NaN or infinite values, targets outside what
    the loss takes."""
