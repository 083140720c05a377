"""Keyed contexts with a lifecycle (Esper's keyed segmented context with initiation and
termination): one partition per key at a time, ended by its own terminating condition."""

from __future__ import annotations

from operators.base import PartitionCtx
from operators.contexts.conditions import CondAfterSpec, CondFilterSpec
from operators.contexts.managers import Change, KeyedItem, KeyedSpec
from operators.state import MemoryNamespace


def key(e, c):  # noqa: ANN001, ANN201
    return e["k"]


ITEM = KeyedItem("T", (key,), key_texts=("k",), alias="t")
NEG = CondFilterSpec("T", lambda ev, c: ev[0]["v"] < 0)


def build(spec: KeyedSpec, state: MemoryNamespace | None = None):  # noqa: ANN201
    m = spec.build(state if state is not None else MemoryNamespace(), PartitionCtx())
    m.deploy(0)
    return m


def test_terminating_filter_ends_only_the_events_key() -> None:
    m = build(KeyedSpec("K", (ITEM,), terminated=NEG))
    a, b = {"k": "a", "v": 1}, {"k": "b", "v": 2}
    assert m.on_event("T", a, 0) == [Change("start", 0)]
    assert m.on_event("T", b, 0) == [Change("start", 1)]
    assert m.props(0) == {"name": "K", "id": 0, "key1": "a", "t": a}
    # the ending event neither counts in the partition nor starts a new one
    assert m.on_event("T", {"k": "a", "v": -1}, 0) == [Change("end", 0)]
    assert m.route("T", {"k": "a", "v": -1}, 0) == []
    assert m.key(0) == ["a"] and m.live() == [1]
    assert m.on_event("T", {"k": "a", "v": -1}, 0) == [Change("start", 2)]
    assert m.route("T", {"k": "a", "v": 5}, 0) == [2]


def test_initiating_filter_and_partition_filter() -> None:
    item = KeyedItem("T", (key,), filter=lambda e, c: e["v"] > 0, key_texts=("k",))
    init = CondFilterSpec("T", lambda ev, c: ev[0]["v"] == 0, "s")
    m = build(KeyedSpec("K", (item,), (init,), CondFilterSpec("T", lambda ev, c: ev[0]["v"] == 9)))
    assert m.on_event("T", {"k": "a", "v": 3}, 0) == []
    start = {"k": "a", "v": 0}
    assert m.on_event("T", start, 0) == [Change("start", 0)]
    assert m.props(0)["s"] == start
    # the partition-by filter still decides what the statements see
    assert m.route("T", start, 0) == [] and m.route("T", {"k": "a", "v": 3}, 0) == [0]
    assert m.on_event("T", {"k": "a", "v": 9}, 0) == [Change("end", 0)]


def test_terminated_after_per_key_and_restore() -> None:
    state = MemoryNamespace()
    m = build(KeyedSpec("K", (ITEM,), terminated=CondAfterSpec(10_000)), state)
    m.on_event("T", {"k": "a"}, 0)
    m.on_event("T", {"k": "b"}, 4000)
    assert m.next_timer() == 10_000
    again = KeyedSpec("K", (ITEM,), terminated=CondAfterSpec(10_000)).build(state, PartitionCtx())
    assert again.live() == [0, 1] and again.next_timer() == 10_000
    assert again.on_time(10_000) == [Change("end", 0)]
    assert again.on_time(14_000) == [Change("end", 1)]
    assert again.on_event("T", {"k": "a"}, 15_000) == [Change("start", 2)]


def test_null_key_parts_are_key_values() -> None:
    two = KeyedItem("T", (key, lambda e, c: e.get("j")), key_texts=("k", "j"))
    m = build(KeyedSpec("K", (two,), terminated=NEG))
    assert m.on_event("T", {"k": None, "j": None, "v": 1}, 0) == [Change("start", 0)]
    assert m.on_event("T", {"k": "x", "j": None, "v": 1}, 0) == [Change("start", 1)]
    assert m.route("T", {"k": None, "j": None, "v": 1}, 0) == [0]
    assert m.props(0) == {"name": "K", "id": 0, "key1": None, "key2": None}
