"""Pattern matcher: repeat, repeat-until and while guards (Esper ref. "Patterns",
"Repeat", "Repeat-Until", "While"), on every state backend of test_matcher."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from operators.base import PartitionCtx
from operators.patterns import (
    And,
    Every,
    Filter,
    FollowedBy,
    Not,
    Or,
    PatternSpec,
    Repeat,
    TimerInterval,
    WhileGuard,
    Within,
)
from operators.state import MemoryStore, RocksStore
from tests.operators.patterns.test_matcher import e, prop, run, t

__all__ = ["run"]  # the backend fixture


def const(n: int | None) -> Callable[..., Any]:
    """A constant bound expression."""
    return lambda et, ctx: n


def exactly(n: int, child: Any, tags: tuple[str, ...] = ()) -> Repeat:
    """``[n] child``."""
    return Repeat(child, None, const(n), None, True, tags)


def ids(rows: list[dict[str, Any]]) -> list[Any]:
    """The ``id`` of each event of a list tag."""
    return [r["id"] for r in rows]


def test_exact_repeat_collects_a_list_and_finishes(run) -> None:
    """``[2] a=A``: true with the second A; ``a`` is the list of both; then finished."""
    spec = PatternSpec(exactly(2, Filter("a", "A"), ("a",)))
    out, d = run(spec, [e("B", id=0), e("A", id=1), t(5), e("A", id=2), e("A", id=3)])
    assert out == [(5, {"a": [{"id": 1}, {"id": 2}]})]
    assert d.m.finished


def test_every_exact_repeat_restarts_after_each_pair(run) -> None:
    """``every [2] a=A``: A1 A2 | A3 A4 (every restarts the repeat once it is true)."""
    spec = PatternSpec(Every(exactly(2, Filter("a", "A"), ("a",))))
    out, _ = run(spec, [e("A", id=n) for n in range(1, 6)])
    assert [ids(r["a"]) for _, r in out] == [[1, 2], [3, 4]]


def test_repeat_of_or_lists_each_tag_apart(run) -> None:
    """``[3] (a=A or b=B)``: three results; each tag lists its own events."""
    spec = PatternSpec(exactly(3, Or((Filter("a", "A"), Filter("b", "B"))), ("a", "b")))
    out, _ = run(spec, [e("A", id=1), e("B", id=2), e("B", id=3), e("A", id=4)])
    assert out == [(0, {"a": [{"id": 1}], "b": [{"id": 2}, {"id": 3}]})]


def test_until_without_bounds(run) -> None:
    """``a=A until b=B``: As are collected until B; a B before any A gives no ``a``."""
    spec = PatternSpec(Every(Repeat(Filter("a", "A"), Filter("b", "B"), array_tags=("a",))))
    out, _ = run(spec, [e("B", id=0), e("A", id=1), e("A", id=2), t(7), e("B", id=3)])
    assert out == [(0, {"a": None, "b": {"id": 0}}),
                   (7, {"a": [{"id": 1}, {"id": 2}], "b": {"id": 3}})]


def test_until_below_the_lower_bound_is_false(run) -> None:
    """``[2:] a=A until b=B``: one A then B ends the repeat without a match."""
    spec = PatternSpec(Repeat(Filter("a", "A"), Filter("b", "B"), const(2), None, False, ("a",)))
    out, d = run(spec, [e("A", id=1), e("B", id=2), e("A", id=3), e("B", id=4)])
    assert out == []
    assert d.m.finished


def test_upper_bound_stops_collecting(run) -> None:
    """``[:2] a=A until b=B``: only the first two As count; B still ends it."""
    spec = PatternSpec(Repeat(Filter("a", "A"), Filter("b", "B"), None, const(2), False, ("a",)))
    out, _ = run(spec, [e("A", id=1), e("A", id=2), e("A", id=3), e("B", id=4)])
    assert out == [(0, {"a": [{"id": 1}, {"id": 2}], "b": {"id": 4}})]


def test_same_event_for_until_and_repeat_counts_for_until(run) -> None:
    """``[1:] a=A until b=A(id = 2)``: A2 ends it before it can count: a = [A1]."""
    until = Filter("b", "A", lambda et, ctx: et[0]["id"] == 2)
    spec = PatternSpec(Repeat(Filter("a", "A"), until, const(1), None, False, ("a",)))
    out, _ = run(spec, [e("A", id=1), e("A", id=2)])
    assert out == [(0, {"a": [{"id": 1}], "b": {"id": 2}})]


def test_swapped_and_null_bounds(run) -> None:
    """``[3:1]`` counts as ``[1:3]``; a null bound is no bound (a variable set to null)."""
    spec = PatternSpec(Repeat(Filter("a", "A"), Filter("b", "B"), const(3), const(1), False,
                              ("a",)))
    out, _ = run(spec, [e("A", id=n) for n in range(1, 6)] + [e("B", id=9)])
    assert [ids(r["a"]) for _, r in out] == [[1, 2, 3]]
    spec = PatternSpec(Repeat(Filter("a", "A"), Filter("b", "B"), const(None), const(None),
                              False, ("a",)))
    out, _ = run(spec, [e("B", id=9)])
    assert out == [(0, {"a": None, "b": {"id": 9}})]


def test_bound_reads_an_earlier_tag(run) -> None:
    """``s=S -> [s.n] b=B``: the bound is evaluated when the repeat starts."""
    rep = Repeat(Filter("b", "B"), None, prop("s", "n"), None, True, ("b",))
    spec = PatternSpec(FollowedBy((Filter("s", "S"), rep)))
    out, _ = run(spec, [e("B", id=0), e("S", n=2), e("B", id=1), e("B", id=2)])
    assert out == [(0, {"s": {"n": 2}, "b": [{"id": 1}, {"id": 2}]})]


def test_until_timer_and_nested_lists_flatten(run) -> None:
    """``(a=A until b=B) until timer:interval(10)``: inner lists join the outer ones."""
    inner = Repeat(Filter("a", "A"), Filter("b", "B"), array_tags=("a",))
    spec = PatternSpec(Repeat(inner, TimerInterval(10), array_tags=("a", "b")))
    out, d = run(spec, [e("A", id=1), e("B", id=2), e("A", id=3), e("A", id=4), e("B", id=5),
                        e("A", id=6), t(10)])
    assert out == [(10, {"a": [{"id": 1}, {"id": 3}, {"id": 4}],
                         "b": [{"id": 2}, {"id": 5}]})]
    assert d.m.finished


def test_repeated_part_turning_false_ends_the_repeat(run) -> None:
    """``(a=A and not B) until c=C``: B makes the repeated part false, so the repeat is
    permanently false (no match at C)."""
    child = And((Filter("a", "A"), Not(Filter(None, "B"))))
    spec = PatternSpec(Repeat(child, Filter("c", "C"), array_tags=("a",)))
    out, d = run(spec, [e("A", id=1), e("B", id=2), e("C", id=3)])
    assert out == []
    assert d.m.finished


def test_while_passes_until_false(run) -> None:
    """``(every a=A) while (a.v < 10)``: As pass until one has v >= 10."""
    cond = lambda et, ctx: et[1]["a"]["v"] < 10  # noqa: E731
    spec = PatternSpec(WhileGuard(Every(Filter("a", "A")), cond))
    out, d = run(spec, [e("A", v=1), e("A", v=5), e("A", v=10), e("A", v=2)])
    assert [r["a"]["v"] for _, r in out] == [1, 5]
    assert d.m.finished


def test_while_null_drops_only_that_result(run) -> None:
    """A null condition drops the result but keeps the guard (Esper's expression guard)."""
    def cond(et: Any, ctx: Any) -> Any:
        v = et[1]["a"]["v"]
        return None if v is None else v < 10
    spec = PatternSpec(WhileGuard(Every(Filter("a", "A")), cond))
    out, _ = run(spec, [e("A", v=1), e("A", v=None), e("A", v=3), e("A", v=11), e("A", v=4)])
    assert [r["a"]["v"] for _, r in out] == [1, 3]


def test_every_while_restarts_after_false(run) -> None:
    """``every (a=A while (a.v < 10))``: a false guard only ends one instance."""
    cond = lambda et, ctx: et[1]["a"]["v"] < 10  # noqa: E731
    spec = PatternSpec(Every(WhileGuard(Filter("a", "A"), cond)))
    out, _ = run(spec, [e("A", v=1), e("A", v=12), e("A", v=3)])
    assert [r["a"]["v"] for _, r in out] == [1, 3]


def test_repeat_state_is_stored_per_node(tmp_path: Path) -> None:
    """A rebuilt matcher continues a half-done repeat with its collected events."""
    spec = PatternSpec(Repeat(Filter("a", "A"), Filter("b", "B"), const(2), None, False, ("a",)))
    ns = MemoryStore().namespace("p")
    m = spec.build(ns, PartitionCtx())
    assert m.on_event("A", {"id": 1}, 1) == []
    m2 = spec.build(ns, PartitionCtx(now_ms=2))
    assert m2.on_event("A", {"id": 2}, 2) == []
    m3 = spec.build(ns, PartitionCtx(now_ms=3))
    assert m3.on_event("B", {"id": 3}, 3) == [{"a": [{"id": 1}, {"id": 2}], "b": {"id": 3}}]


def test_a_repeat_writes_each_event_once(tmp_path: Path) -> None:
    """Collecting the n-th event writes that event and the small node record, not the
    n events collected before; the end deletes them with the node."""
    writes: list[tuple[bytes, Any]] = []
    store = RocksStore(tmp_path / "db", sink=lambda k, v: writes.append((k, v)))
    try:
        spec = PatternSpec(Repeat(Filter("a", "A"), Filter("b", "B"), array_tags=("a",)))
        ns = store.namespace("p")
        m = spec.build(ns, PartitionCtx())
        for i in range(200):
            m.on_event("A", {"id": i, "pad": "x" * 50}, i)
        writes.clear()
        m.on_event("A", {"id": 200, "pad": "x" * 50}, 200)
        written = sum(len(v) for _, v in writes if v is not None)
        # the event, the repeat record, the old filter deleted, the new one put, meta
        assert len(writes) <= 5 and written < 600
        out = m.on_event("B", {"id": 0}, 201)
        assert [a["id"] for a in out[0]["a"]] == list(range(201))
        assert m.finished
        assert [k for k, _ in ns.items() if k != "meta"] == []
    finally:
        store.close()


def test_every_timer_until_hands_lists_to_later_spans(run) -> None:
    """``every (b=B until timer:interval(2))``: a span without B after one with Bs
    reports that list again (Esper's shared begin map); the first spans report none."""
    spec = PatternSpec(Every(Repeat(Filter("b", "B"), TimerInterval(2000), array_tags=("b",))))
    out, _ = run(spec, [t(500), e("B", id=1), t(4500), e("B", id=2), t(8500), e("B", id=3),
                        t(12_000)])
    assert [(ms, [x["id"] for x in r["b"]] if r["b"] else None) for ms, r in out] == [
        (2000, [1]), (4000, None), (6000, [2]), (8000, [2]), (10_000, [3]), (12_000, [3])]


def test_within_keeps_its_deadline_after_false(run) -> None:
    """``every ((a=A and not B) where timer:within(3))``: the guard of an instance that
    B made false still reports false at its deadline, so every starts one more."""
    guarded = Within(And((Filter("a", "A"), Not(Filter(None, "B")))), 3000)
    spec = PatternSpec(Every(guarded))
    out, _ = run(spec, [e("B", id=0), t(1000), e("B", id=1), t(5000), e("A", id=2)])
    # B0 ends #1 (kept deadline 3000) -> #2 at 0; B1 ends #2 (kept 3000) -> #3 at 1000;
    # at 3000 both kept deadlines start #4 and #5; #3 expires at 4000 -> #6: A2 meets 3
    assert [r["a"]["id"] for _, r in out] == [2, 2, 2]
