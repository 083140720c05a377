"""The state of ``min``, ``max`` and ``median``: a sorted bag of the values in the window.

A small state is a sorted list (``operators.aggregates._Sorted``); from ``BAG_FROM``
values on it is a ``SortedBag``, which adds or removes one value in O(log n) and reads
its ends and middle in O(log n), so the cost per event does not grow with the window.
Stored in RocksDB, a bag is not written whole with its group's record: ``BagNamespace``
keeps one entry ``(group, value) -> count`` per distinct value and writes the entries of
the values that changed; the record holds the bag's size.  So the changelog gets O(1)
entries per event, whatever the window holds.
"""

from __future__ import annotations

from collections.abc import Iterator
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


class BagNamespace:
    """A result set's namespace whose group records hold sorted bags at ``indexes``.

    A record is stored with each bag replaced by ``{"bag": size}``; the bag's values live
    in the child namespace ``("bag", index)`` as ``(group, value) -> count``.  Reading the
    records back puts the bags together again.
    """

    __slots__ = ("ns", "indexes", "bag_ns")

    def __init__(self, ns: Any, indexes: tuple[int, ...]) -> None:
        self.ns = ns
        self.indexes = indexes
        self.bag_ns = {i: ns.child(("bag", i)) for i in indexes}

    def put(self, key: Key, rec: list) -> None:
        states = rec[0]
        stored: list | None = None
        for i in self.indexes:
            bag = states[i]
            if type(bag) is not SortedBag:  # a small sorted list goes whole in the record
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
                    bag = SortedBag(values[i].get(key, ()))
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

    def child(self, name: Any) -> Any:
        return self.ns.child(name)

    def key_count(self) -> int:
        return int(self.ns.key_count())
