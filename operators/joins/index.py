"""Event indexes of a join stream: what a lookup from another stream reads.

An index is an in-memory mirror of one stream's data window (the window's state is
the state; the index is rebuilt from the window's contents when a partition is built).
Rows keep arrival order within a bucket, as Esper's event tables do (Esper ref. 2, "event
indexes": the compiler indexes the where-clause correlation of a join).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from sortedcontainers import SortedDict

from operators.base import Row

KeyFn = Callable[[Row], Any]
"""The index key of an event of the indexed stream (None: the event matches nothing)."""


def hashable(value: Any) -> Any:
    """A dict key for a key value: scalars as they are (1 and 1.0 meet, as the equality
    of the where clause has them), nested values through JSON."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return "\x00" + json.dumps(value, sort_keys=True, default=str)


class ScanIndex:
    """Every row of the stream in arrival order: a lookup is a full scan (nested loop)."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def remove(self, row: Row) -> None:
        _remove_first(self.rows, row)

    def all(self) -> list[Row]:
        return self.rows

    def __len__(self) -> int:
        return len(self.rows)


class HashIndex:
    """Rows bucketed by the value of the key expressions (equality lookups, O(matches))."""

    __slots__ = ("key", "buckets", "size")

    def __init__(self, key: KeyFn) -> None:
        self.key = key
        self.buckets: dict[Any, list[Row]] = {}
        self.size = 0

    def add(self, row: Row) -> None:
        k = self.key(row)
        if k is None:
            return  # a null key equals nothing (three-valued '=')
        b = self.buckets.get(k)
        if b is None:
            self.buckets[k] = [row]
        else:
            b.append(row)
        self.size += 1

    def remove(self, row: Row) -> None:
        k = self.key(row)
        if k is None:
            return
        b = self.buckets.get(k)
        if b is not None and _remove_first(b, row):
            self.size -= 1
            if not b:
                del self.buckets[k]

    def get(self, k: Any) -> list[Row]:
        if k is None:
            return []
        return self.buckets.get(k) or []

    def __len__(self) -> int:
        return self.size


Bounds = tuple[Any, bool, Any, bool]
"""A range lookup: low end, whether it is included, high end, whether it is included
(an end None: unbounded)."""


class SortedIndex:
    """Rows in a sorted map of one key (relational-operator lookups): a lookup gives the
    rows of the keys in range in ascending key order, rows of one key in arrival order,
    as Esper's sorted event table (a tree map of linked hash sets) gives them.  A null
    or NaN key is never found (the comparison is not true)."""

    __slots__ = ("key", "tree", "size")

    def __init__(self, key: KeyFn) -> None:
        self.key = key
        self.tree: SortedDict = SortedDict()
        self.size = 0

    def add(self, row: Row) -> None:
        k = self.key(row)
        if k is None or k != k:
            return
        b = self.tree.get(k)
        if b is None:
            self.tree[k] = [row]
        else:
            b.append(row)
        self.size += 1

    def remove(self, row: Row) -> None:
        k = self.key(row)
        if k is None or k != k:
            return
        b = self.tree.get(k)
        if b is not None and _remove_first(b, row):
            self.size -= 1
            if not b:
                del self.tree[k]

    def get(self, bounds: Bounds | None) -> list[Row]:
        if bounds is None:
            return []
        lo, lo_in, hi, hi_in = bounds
        tree = self.tree
        out: list[Row] = []
        for k in tree.irange(lo, hi, (lo_in, hi_in)):
            out.extend(tree[k])
        return out

    def __len__(self) -> int:
        return self.size


def _remove_first(rows: list[Row], row: Row) -> bool:
    """Remove ``row`` (the same object, else the first equal one): the oldest of equal
    rows leaves first, as every arrival-ordered window expires them."""
    for i, r in enumerate(rows):
        if r is row:
            del rows[i]
            return True
    for i, r in enumerate(rows):
        if r == row:
            del rows[i]
            return True
    return False


def fill(index: ScanIndex | HashIndex | SortedIndex, rows: Iterable[Row]) -> None:
    """Load a window's current rows (a rebuilt partition)."""
    for r in rows:
        index.add(r)
