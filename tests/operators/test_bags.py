"""min/max/median state: a sorted list that becomes a bag in large windows (``ExtremeBag``
for min and max, ``SortedBag`` for median), and its storage in RocksDB as one entry per
distinct value (``BagNamespace``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from operators.aggregates import BAG_FROM, Max, Median, Min, make_aggregator
from operators.bags import BAGS, BagNamespace, ExtremeBag, SortedBag
from operators.base import PartitionCtx
from operators.resultset import GROUPED, AggregateDef, ResultSetSpec, SelectColumn
from operators.state import RocksStore, decode_value, encode_value


def test_aggregates_follow_a_sorted_reference_across_the_switch_to_a_bag() -> None:
    rnd = random.Random(5)
    aggs = (Min(), Max(), Median())
    states: list[Any] = [a.initial() for a in aggs]
    ref: list[float] = []
    for step in range(6 * BAG_FROM):
        grow = step < 3 * BAG_FROM or rnd.random() < 0.45
        if grow or not ref:
            v = float(rnd.randint(0, 500))
            ref.append(v)
            states = [a.enter(s, v) for a, s in zip(aggs, states)]
        else:
            v = ref.pop(rnd.randrange(len(ref)))
            states = [a.leave(s, v) for a, s in zip(aggs, states)]
        states = [a.leave(s, 1e9) for a, s in zip(aggs, states)]  # absent: no change
        ordered = sorted(ref)
        n = len(ordered)
        median = (float(ordered[n // 2]) if n % 2 else (ordered[n // 2 - 1]
                                                       + ordered[n // 2]) / 2.0)
        assert [a.result(s) for a, s in zip(aggs, states)] == [ordered[0], ordered[-1],
                                                                median]
    # each grew past BAG_FROM and stayed a bag
    assert [type(s) for s in states] == [ExtremeBag, ExtremeBag, SortedBag]
    assert states[0].plain() == states[1].plain() == states[2].plain() == sorted(ref)


def test_an_extreme_bag_follows_a_reference_and_its_heap_stays_bounded() -> None:
    """Values leave in any order, and repeat; the heap keeps the entries of removed values
    only until they surface or it holds twice the live values (then it is rebuilt)."""
    rnd = random.Random(11)
    for greatest in (False, True):
        bag = ExtremeBag(greatest=greatest)
        ref: list[int] = []
        for step in range(20_000):
            if step < 2_000 or (ref and rnd.random() < 0.5) or not ref:
                v = rnd.randint(-300, 300)
                ref.append(v)
                bag.add(v)
            else:
                v = ref.pop(rnd.randrange(len(ref)))
                bag.discard(v)
            bag.discard(10_000)  # absent: no change
            assert bag.extreme() == ((max if greatest else min)(ref) if ref else None)
            assert len(bag) == len(ref) and bag.count(v) == ref.count(v)
            assert len(bag.heap) <= 2 * len(set(ref)) + 33
        assert bag.plain() == sorted(ref)


def test_max_over_values_that_cannot_be_negated() -> None:
    bag = ExtremeBag(["b", "a"], greatest=True)
    assert bag.extreme() == "b"
    bag.add("c")
    bag.discard("c")
    bag.discard("b")
    assert bag.extreme() == "a" and bag.plain() == ["a"]
    mixed = ExtremeBag([2, 7.5], greatest=True)
    mixed.add(3)
    mixed.discard(7.5)
    assert mixed.extreme() == 3 and type(mixed.extreme()) is int


def test_a_bag_is_written_as_its_list_where_it_is_stored_whole() -> None:
    bag = SortedBag([3, 1, 2])
    assert decode_value(encode_value([[bag, 7], None])) == [[[1, 2, 3], 7], None]
    assert Min().result(decode_value(encode_value(bag))) == 1  # read back as a list


def _spec() -> ResultSetSpec:
    key = (lambda r, c: r["k"])
    aggs = tuple(AggregateDef(f"{n}(p)", make_aggregator(n), lambda r, c: r["p"])
                 for n in ("min", "max", "median", "count"))
    cols = (SelectColumn("k", key),) + tuple(
        SelectColumn(a.text, lambda r, c, i=i: c.aggs[i]) for i, a in enumerate(aggs))
    return ResultSetSpec(GROUPED, cols, aggs, (key,))


def test_a_large_bag_writes_entries_for_the_values_that_changed(tmp_path: Path) -> None:
    writes: list[tuple[bytes, bytes | None]] = []
    store = RocksStore(tmp_path / "db", sink=lambda k, v: writes.append((k, v)))
    spec = _spec()
    rs = spec.build(store.namespace("rs"), PartitionCtx())
    assert type(rs.state) is BagNamespace and rs.state.indexes == (0, 1, 2)
    windows: dict[str, list[dict]] = {"a": [], "b": []}  # a length window per group
    switches = 0
    for i in range(5 * BAG_FROM):
        row = {"k": "a" if i % 3 else "b", "p": float(i % 700)}
        window = windows[row["k"]]
        window.append(row)
        old = [window.pop(0)] if len(window) > BAG_FROM + 300 else []
        rec = rs.groups.get(row["k"])
        was_bag = rec is not None and isinstance(rec[0][0], BAGS)
        writes.clear()
        rs.process([row], old)
        is_bag = isinstance(rs.groups[row["k"]][0][0], BAGS)
        if not is_bag:  # a small list goes whole with the record
            assert len(writes) == 1
        elif was_bag:  # a bag writes the values that changed (entered, left) per bag
            assert 1 < len(writes) <= 1 + 3 * 2, (i, len(writes))
        else:  # it just became a bag: each of its distinct values once
            assert len(writes) == 1 + 3 * len(set(rs.groups[row["k"]][0][0]))
            switches += 1
    assert switches == 2  # each group once
    expected = {k: [min(r["p"] for r in w), max(r["p"] for r in w)]
                for k, w in windows.items()}
    # a result set rebuilt from the store has the same bags
    again = spec.build(store.namespace("rs"), PartitionCtx())
    for k in ("a", "b"):
        rec, rebuilt = rs.groups[k], again.groups[k]
        assert [type(b) for b in rebuilt[0][:3]] == [ExtremeBag, ExtremeBag, SortedBag]
        assert [b.plain() for b in rebuilt[0][:3]] == [b.plain() for b in rec[0][:3]]
        assert rs._results(rec) == again._results(rebuilt)
        assert rs._results(rec)[:2] == expected[k]
    row = {"k": "a", "p": -1.0}
    assert again.process([row], [])[0] == rs.process([row], [])[0]
    store.db.close()


def test_records_stored_whole_before_are_read_as_they_were(tmp_path: Path) -> None:
    """A state written as one list (small, or by an earlier version) reads back as the
    list; it becomes a bag, stored per value, once it grows past BAG_FROM."""
    store = RocksStore(tmp_path / "db")
    ns = store.namespace("rs")
    values = [float(v) for v in range(BAG_FROM)]
    ns.put("a", [[values, values, values, BAG_FROM], {"k": "a", "p": 0.0}, 0])
    rs = _spec().build(ns, PartitionCtx())
    assert rs.groups["a"][0][0] == values
    rs.process([{"k": "a", "p": 5000.0}], [])
    assert type(rs.groups["a"][0][0]) is ExtremeBag
    again = _spec().build(store.namespace("rs"), PartitionCtx())
    assert again.groups["a"][0][0].plain() == [*values, 5000.0]
    store.db.close()
