"""The ledger's records of one kind read as columns: the report after a run reads a few fields of every
trade and deal, and a million bars record about 330,000 of them.

The bar loop records each deal, trade, filled order and segment as a tuple of plain values in its record's
field order (``backtests.broker.ledger``); a record object is built from its row only when someone reads the
record lists. The report's readers take each field as a column straight from the rows instead: one pass of
``operator.itemgetter`` over them per field, kept, so no record is built and none is read field by field.
Records already built (read by a user, a test, or a pending order's record, which follows its order) are
read as they are now, through their fields, and come first: the rows are recorded after them.
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter, itemgetter
from typing import NamedTuple

import numpy as np


def field_names(record_type: type) -> tuple[str, ...]:
    """The fields of a record class (a dataclass or a ``NamedTuple``), in the order its rows hold them."""
    if hasattr(record_type, "_fields"):
        return record_type._fields
    return tuple(f.name for f in fields(record_type))


def rows_of(records: list, rows: list[tuple], names: tuple[str, ...]) -> list[tuple]:
    """Every record's fields as a row (``names``' order), the built ``records`` first, then the ``rows``
    recorded since; the rows themselves (no copy) where no record is built."""
    if not records:
        return rows
    return [*map(attrgetter(*names), records), *rows]


class Columns:
    """The fields of one kind of record as columns, each read from the rows once, when first asked for."""

    def __init__(self, rows: list[tuple], names: tuple[str, ...]):
        self.rows = rows
        self._at = {name: k for k, name in enumerate(names)}
        self._lists: dict[str, list] = {}
        self._arrays: dict[tuple[str, np.dtype], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def table(self, names: tuple[str, ...]) -> list[tuple]:
        """Each row's fields ``names`` as one tuple (a table's rows in its column order: one C call a row,
        the same tuples a record's ``row`` makes)."""
        return list(map(itemgetter(*(self._at[name] for name in names)), self.rows))

    def values(self, name: str) -> list:
        """Field ``name`` of every row, as the Python objects recorded (kept: read once)."""
        if name not in self._lists:
            self._lists[name] = list(map(itemgetter(self._at[name]), self.rows))
        return self._lists[name]

    def texts(self, name: str) -> np.ndarray:
        """Field ``name`` as an array of objects (to compare with text; kept, read-only: copy to change)."""
        return self._array(name, object)

    def numbers(self, name: str, dtype: type = np.float64) -> np.ndarray:
        """Field ``name`` as an array of ``dtype`` (kept, read-only: the report's readers share it)."""
        return self._array(name, dtype)

    def _array(self, name: str, dtype: type) -> np.ndarray:
        key = (name, np.dtype(dtype))
        made = self._arrays.get(key)
        if made is None:
            if dtype is object:
                made = np.array(self.values(name), dtype=object)
            else:  # read from the rows in one pass: no list of the field kept beside its array
                values = self._lists.get(name) or map(itemgetter(self._at[name]), self.rows)
                made = np.fromiter(values, dtype=dtype, count=len(self.rows))
            made.flags.writeable = False
            self._arrays[key] = made
        return made


class Events(NamedTuple):
    """Money events (bar, amount, deal[, moment]) as columns, read-only: ``deal`` is NaN where none is
    given, ``moments`` -1 (the event's deal's moment, or its bar's open)."""

    bars: np.ndarray  # int64
    amounts: np.ndarray  # float64
    deals: np.ndarray  # float64, NaN: no deal
    moments: np.ndarray  # int64 UTC ns of a swap charged inside its bar (a midnight there), -1: none

    @classmethod
    def of(cls, events: list[tuple[int, float, int | None]]) -> Events:
        made = cls(
            np.fromiter(map(itemgetter(0), events), dtype=np.int64, count=len(events)),
            np.fromiter(map(itemgetter(1), events), dtype=np.float64, count=len(events)),
            np.array(list(map(itemgetter(2), events)), dtype=np.float64).reshape(-1),  # None: NaN
            np.fromiter((_moment(e) for e in events), dtype=np.int64, count=len(events)),
        )
        for column in made:
            column.flags.writeable = False
        return made


def _moment(event: tuple) -> int:
    """An event's moment inside its bar (UTC ns), -1 where it has none."""
    return -1 if len(event) < 4 or event[3] is None else event[3]
