"""The state of ``min``, ``max`` and ``median``: a bag of the values in the window.

A small state is a sorted list (``operators.aggregates._Sorted``); from ``BAG_FROM``
values on it is a bag, so that the cost per event does not grow with the window: a
``SortedBag`` for ``median`` (adds, removes and reads its middle in O(log n)), an
``ExtremeBag`` for ``min`` and ``max`` (a count per value and a binary heap of them,
C-speed ``heapq``, whose entries left by removed values are dropped as they surface).
Stored in RocksDB, a bag is not written whole with its group's record: ``BagNamespace``
keeps one entry ``(group, value) -> count`` per distinct value and writes the entries of
the values that changed; the record holds the bag's size.  So the changelog gets O(1)
entries per event, whatever the window holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from heapq import heapify, heappop, heappush
from typing import Any

from sortedcontainers import SortedList

from operators.state import Key


class SortedBag(SortedList):
    """Values in order, duplicates kept.  ``changes`` (None until a store tracks the bag)
    collects the values added or removed since the bag was last stored."""

    def __init__(self, values: Any = ()) -> None:
        super().__init__(values)
        self.changes: set[Any] | None = None

    def plain(self) -> list[Any]:
        """The values as a list (the bag's JSON form in a namespace that stores it whole)."""
        return list(self)


class _Desc:
    """A heap entry that orders its value greatest first (``max`` over values that
    cannot be negated)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return bool(other.v < self.v)


_NEGATABLE = (int, float, Decimal)


class ExtremeBag:
    """The values of a large ``min`` or ``max`` window: ``counts`` per value, and a heap
    of the values with the least (``greatest`` False) or greatest first.

    A value whose count falls to 0 stays in the heap (and in ``counts`` at 0) until it
    reaches the top, where ``extreme`` drops it; the heap is rebuilt from the live values
    once it holds more than twice as many, so its size and the cost per value stay
    O(log n).  Storage and ``changes`` work as for ``SortedBag``; ``plain`` is the sorted
    list of the values, the same JSON form.
    """

    __slots__ = ("counts", "heap", "size", "live", "greatest", "negated", "changes")

    def __init__(self, values: Any = (), greatest: bool = False) -> None:
        self.counts: dict[Any, int] = {}
        self.heap: list[Any] = []
        self.size = 0
        self.live = 0
        """Distinct values with a count above 0."""
        self.greatest = greatest
        self.negated = True
        """For ``max``: heap entries are the values negated (numbers), else ``_Desc``."""
        self.changes: set[Any] | None = None
        for v in values:
            self.add(v)

    def _entry(self, v: Any) -> Any:
        if not self.greatest:
            return v
        if self.negated:
            if type(v) in _NEGATABLE:
                return -v
            self.negated = False
            self.heap = [_Desc(-e) for e in self.heap]
            heapify(self.heap)
        return _Desc(v)

    def _value(self, e: Any) -> Any:
        if not self.greatest:
            return e
        return -e if self.negated else e.v

    def add(self, v: Any) -> None:
        counts = self.counts
        c = counts.get(v)
        if c is None:
            e = self._entry(v)  # may rebuild the heap: take it after
            heappush(self.heap, e)
            counts[v] = 1
            self.live += 1
        else:
            counts[v] = c + 1
            if c == 0:
                self.live += 1
        self.size += 1

    def discard(self, v: Any) -> None:
        counts = self.counts
        c = counts.get(v)
        if not c:
            return
        counts[v] = c - 1
        self.size -= 1
        if c == 1:
            self.live -= 1
            if len(self.heap) > 2 * self.live + 32:
                self._rebuild()

    def _rebuild(self) -> None:
        counts = {v: c for v, c in self.counts.items() if c}
        if not self.greatest:
            heap = list(counts)
        elif self.negated:
            heap = [-v for v in counts]
        else:
            heap = [_Desc(v) for v in counts]
        heapify(heap)
        self.counts, self.heap = counts, heap

    def extreme(self) -> Any:
        """The least (or greatest) value, or None when empty."""
        if not self.size:
            return None
        heap, counts = self.heap, self.counts
        while True:
            v = self._value(heap[0])
            if counts[v]:
                return v
            heappop(heap)
            del counts[v]

    def count(self, v: Any) -> int:
        return self.counts.get(v, 0)

    def clear(self) -> None:
        self.counts.clear()
        self.heap.clear()
        self.size = self.live = 0

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[Any]:
        for v, c in self.counts.items():
            for _ in range(c):
                yield v

    def plain(self) -> list[Any]:
        """The values in order (the bag's JSON form in a namespace that stores it whole)."""
        return sorted(self)


BAGS = (SortedBag, ExtremeBag)
"""The large-window states of ``min``, ``max`` and ``median``."""


class BagNamespace:
    """A result set's namespace whose group records hold sorted bags at ``indexes``.

    A record is stored with each bag replaced by ``{"bag": size}``; the bag's values live
    in the child namespace ``("bag", index)`` as ``(group, value) -> count``.  Reading the
    records back puts the bags together again.
    """

    __slots__ = ("ns", "indexes", "bag_ns", "makers")

    def __init__(self, ns: Any, indexes: tuple[int, ...],
                 makers: dict[int, Callable[[list[Any]], Any]] | None = None) -> None:
        self.ns = ns
        self.indexes = indexes
        self.bag_ns = {i: ns.child(("bag", i)) for i in indexes}
        self.makers = makers or {}
        """The bag each index reads back as (``SortedBag`` where none is given)."""

    def put(self, key: Key, rec: list) -> None:
        states = rec[0]
        stored: list | None = None
        for i in self.indexes:
            bag = states[i]
            if not isinstance(bag, BAGS):  # a small sorted list goes whole in the record
                continue
            # a bag not tracked yet became one since the records were read: all of it is new
            changed = bag.changes if bag.changes is not None else set(bag)
            bag.changes = set()
            ns = self.bag_ns[i]
            for v in changed:
                n = bag.count(v)
                if n:
                    ns.put((key, v), n)
                else:
                    ns.delete((key, v))
            if stored is None:
                stored = list(states)
            stored[i] = {"bag": len(bag)}
        self.ns.put(key, rec if stored is None else [stored, *rec[1:]])

    def items(self) -> Iterator[tuple[Key, Any]]:
        values: dict[int, dict[Key, list[Any]]] = {i: {} for i in self.indexes}
        for i, ns in self.bag_ns.items():
            for (group, v), n in ns.items():
                values[i].setdefault(group, []).extend([v] * n)
        for key, rec in self.ns.items():
            states = rec[0]
            for i in self.indexes:
                if isinstance(states[i], dict):
                    bag = self.makers.get(i, SortedBag)(values[i].get(key, ()))
                    bag.changes = set()
                    states[i] = bag
            yield key, rec

    def get(self, key: Key, default: Any = None) -> Any:
        return next((rec for k, rec in self.items() if k == key), default)

    def delete(self, key: Key) -> None:
        self.ns.delete(key)
        for ns in self.bag_ns.values():
            for (group, v), _n in list(ns.items()):
                if group == key:
                    ns.delete((group, v))

    def clear(self) -> None:
        self.ns.clear()

    def drop_records(self, records: Mapping[Key, list]) -> None:
        """Delete these records and their bags' values (those stored at the last ``put``
        are in the bag or among its changes since), without a scan of the namespace."""
        self.ns.drop_records(records)
        for i, ns in self.bag_ns.items():
            for key, rec in records.items():
                bag = rec[0][i]
                if isinstance(bag, BAGS):
                    for v in set(bag).union(bag.changes or ()):
                        ns.delete((key, v))

    def child(self, name: Any) -> Any:
        return self.ns.child(name)

    def key_count(self) -> int:
        return int(self.ns.key_count())
