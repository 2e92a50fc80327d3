"""Errors of the command line's own checks: options that do not fit together, input files it reads itself.

Each message names the option, file or row at fault. The classes derive from ``neuronet.errors.NeuronetError``
(the CLI prints them as one line) and from the built-in family that fits, so existing ``except`` clauses keep
working.
"""

from __future__ import annotations

from neuronet.errors import NeuronetError


class CommandError(NeuronetError, ValueError):
    """An option value, or a combination of options, that the command cannot use; or a bad input file."""


class CommandLookupError(NeuronetError, LookupError):
    """A name given on the command line (an expert advisor, a class in a file) that is not there."""


class CommandOSError(NeuronetError, OSError):
    """The command cannot use a path it was given (e.g. cannot create the ``--out`` folder)."""
