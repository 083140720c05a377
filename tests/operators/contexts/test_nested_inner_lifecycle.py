"""Nested contexts whose inner context is driven by conditions and time (Esper ref. 4.3): each
outer partition gets its inner context when it starts, deployed at once."""

from __future__ import annotations

from operators.base import PartitionCtx
from operators.contexts.conditions import CondAfterSpec, CondFilterSpec, CondNowSpec
from operators.contexts.managers import CategorySpec, Change, KeyedItem, KeyedSpec
from operators.contexts.nested import NestedSpec
from operators.contexts.temporal import NonOverlappingSpec, OverlappingSpec
from operators.state import MemoryNamespace

KEYED = KeyedSpec("K", (KeyedItem("T", (lambda e, c: e["k"],), key_texts=("k",)),))
INIT = OverlappingSpec("I", CondFilterSpec("S", alias="s"), CondAfterSpec(60_000))


def build(spec: NestedSpec, state: MemoryNamespace | None = None):  # noqa: ANN201
    return spec.build(state if state is not None else MemoryNamespace(), PartitionCtx())


def test_keyed_outer_starts_its_inner_context_on_the_keys_first_event() -> None:
    m = build(NestedSpec("N", KEYED, INIT))
    assert m.deploy(0) == []
    assert m.on_event("T", {"k": "a"}, 0) == []  # key a's inner context, no partition yet
    s = {"p": "x"}
    assert m.on_event("S", s, 0) == [Change("start", (0, 0))]
    assert m.route("T", {"k": "a"}, 0) == [(0, 0)]
    props = m.props((0, 0))
    assert (props["id"], props["I"]["s"], props["K"]["key1"]) == (0, s, "a")
    assert m.on_time(60_000) == [Change("end", (0, 0))]


def test_listed_events_reach_only_their_keys_inner_context() -> None:
    inner = OverlappingSpec("I", CondFilterSpec("T", lambda ev, c: ev[0]["v"] > 5, "t"),
                            CondAfterSpec(5000))
    m = build(NestedSpec("N", KEYED, inner))
    m.deploy(0)
    assert m.on_event("T", {"k": "a", "v": 7}, 0) == [Change("start", (0, 0))]
    # b's first event starts b's inner partition only, numbered next over the context
    assert m.on_event("T", {"k": "b", "v": 9}, 0) == [Change("start", (1, 0))]
    assert [m.props(p)["id"] for p in m.live()] == [0, 1]


def test_now_inner_partition_takes_the_starting_event() -> None:
    m = build(NestedSpec("N", KEYED, NonOverlappingSpec("P", CondNowSpec(), CondAfterSpec(10))))
    m.deploy(0)
    assert m.on_event("T", {"k": "a"}, 0) == [Change("start", (0, 0))]
    assert m.route("T", {"k": "a"}, 0) == [(0, 0)]


def test_category_outer_deploys_every_inner_context_and_restores() -> None:
    cat = CategorySpec("C", "T", (("lo", lambda e, c: e["v"] <= 5),
                                  ("hi", lambda e, c: e["v"] > 5)))
    state = MemoryNamespace()
    m = build(NestedSpec("N", cat, INIT), state)
    assert m.deploy(0) == []
    assert m.on_event("S", {"p": "x"}, 0) == [Change("start", (0, 0)), Change("start", (1, 0))]
    assert m.route("T", {"v": 9}, 0) == [(1, 0)]
    again = build(NestedSpec("N", cat, INIT), state)
    assert again.deploy(1000) == [] and again.live() == [(0, 0), (1, 0)]
    assert [again.props(p)["id"] for p in again.live()] == [0, 1]
    assert again.next_timer() == 60_000


def test_category_inner_does_not_see_the_event_that_starts_the_key() -> None:
    cat = CategorySpec("C", "T", (("all", lambda e, c: True),))
    m = build(NestedSpec("N", KEYED, cat))
    m.deploy(0)
    m.on_event("T", {"k": "a"}, 0)
    assert m.route("T", {"k": "a"}, 0) == []
    m.on_event("T", {"k": "a"}, 0)
    assert m.route("T", {"k": "a"}, 0) == [(0, 0)]


def test_unlisted_terminating_type_of_a_keyed_outer_reaches_every_inner_context() -> None:
    outer = KeyedSpec("K", KEYED.items,
                      terminated=CondFilterSpec("E", lambda ev, c: ev[0]["x"] == 1))
    inner = OverlappingSpec("I", CondFilterSpec("E", alias="e"), CondAfterSpec(60_000))
    m = build(NestedSpec("N", outer, inner))
    m.deploy(0)
    assert m.on_event("T", {"k": "a"}, 0) == []
    m.on_event("T", {"k": "b"}, 0)
    assert m.on_event("E", {"x": 0}, 0) == [Change("start", (0, 0)), Change("start", (1, 0))]
    assert m.on_event("E", {"x": 1}, 0) == [Change("end", (0, 0)), Change("end", (1, 0))]
    assert m.live() == []
