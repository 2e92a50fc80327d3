"""The objects that exist before a replay are left out of the garbage collector's full passes during it.

A replay makes records at every deal (orders, deals, trades, position segments: objects the collector
tracks), and CPython runs a full pass over every tracked object each time the long-lived ones have grown
by a quarter. Over a long replay those passes walk the whole heap again and again (the candles' frames,
the modules, an EA's network), which cost about a seventh of a 200,000-bar open-prices run. Frozen
(``gc.freeze``), the heap of before is skipped; the replay's own objects are still collected, cycles
included, and ``gc.unfreeze`` hands the frozen ones back to the collector afterwards.

The youngest generation is also collected less often meanwhile (every ``_YOUNG`` new tracked objects
instead of CPython's 700): a bar loop allocates small objects all the time (bound methods, the records),
nearly all freed by their count at once, and the passes over them were about a tenth of the run. The
report made after the bars (its tables of orders, deals and trades) is made the same way, for the same
reason. The collector's thresholds are restored afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_YOUNG = 20_000  # new tracked objects between two passes over the youngest generation during a replay


@contextmanager
def settled_heap() -> Iterator[None]:
    """Freeze the tracked objects for the ``with`` block, unless the collector is off or someone else has
    frozen objects already (their freeze is theirs to undo)."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    thresholds = gc.get_threshold()
    if thresholds[0]:  # a threshold of 0 is the caller's way of turning automatic collection off
        gc.set_threshold(max(thresholds[0], _YOUNG), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
