"""Which exceptions the CLI reports as a one-line user error rather than an internal failure.

Each package keeps its own error class (``datafeeds`` and ``opencl`` import nothing of ours); all of them
subclass ``ValueError`` or ``OSError`` when the cause is the user's input or environment.
"""

from __future__ import annotations

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, LookupError, TimeoutError)
