"""``NeuronetError``: the one base class of every error a user can fix.

Each package keeps its own error classes (``CandleDataError``, ``NoDeviceError``, ``ModelFileError``,
``EAError``, ``PeriodError`` ...) and derives them from this class, so the command line, or any caller,
tells "your input or environment needs a change" (a one-line message) from a bug (a traceback) by one
``isinstance`` check, instead of guessing from built-in types such as ``ValueError`` that any library
raises for its own bugs.

Why it lives here: every package raises these errors, the lowest layers included (``datafeeds`` and
``opencl`` import nothing else of ours), so the base must be importable from anywhere without pulling in a
layer. This module imports nothing at all and ``neuronet/__init__.py`` only holds the version; the layering
test allows exactly this one module across the arrows and checks that it stays dependency-free.
"""


class NeuronetError(Exception):
    """An error the user can fix (bad input, a bad parameter, a missing device, an unreachable terminal).

    Its message is one line that says what is wrong and where (file, row, parameter). Subclasses also
    derive from the built-in family that fits (``ValueError``, ``OSError``, ``LookupError``) so existing
    ``except`` clauses keep working.
    """
