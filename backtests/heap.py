"""The objects that exist before a replay are left out of the garbage collector's full passes during it.

A replay makes records at every deal (orders, deals, trades, position segments: objects the collector
tracks), and CPython runs a full pass over every tracked object each time the long-lived ones have grown
by a quarter. Over a long replay those passes walk the whole heap again and again (the candles' frames,
the modules, an EA's network), which cost about a seventh of a 200,000-bar open-prices run. Frozen
(``gc.freeze``), the heap of before is skipped; the replay's own objects are still collected, cycles
included, and ``gc.unfreeze`` hands the frozen ones back to the collector afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def settled_heap() -> Iterator[None]:
    """Freeze the tracked objects for the ``with`` block, unless the collector is off or someone else has
    frozen objects already (their freeze is theirs to undo)."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
