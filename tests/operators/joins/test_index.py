"""Join indexes: the sorted index's range lookups (order, bounds, nulls, removal)."""

from __future__ import annotations

from operators.joins.index import SortedIndex


def rows(*vals: float | None) -> list[dict]:
    return [{"id": i, "v": v} for i, v in enumerate(vals)]


def ids(found: list[dict]) -> list[int]:
    return [r["id"] for r in found]


def test_range_gives_ascending_keys_and_arrival_order_among_equal_ones() -> None:
    ix = SortedIndex(lambda r: r["v"])
    rs = rows(5, 3, None, 3.0, float("nan"), 7, -1)
    for r in rs:
        ix.add(r)
    assert len(ix) == 5  # null and NaN keys are not held: no comparison finds them
    assert ids(ix.get((3, False, None, True))) == [0, 5]
    assert ids(ix.get((3, True, 7, False))) == [1, 3, 0]
    assert ids(ix.get((None, True, 5, True))) == [6, 1, 3, 0]
    assert ix.get(None) == []
    ix.remove(rs[1])
    ix.remove(rs[2])
    assert ids(ix.get((None, True, None, True))) == [6, 3, 0, 5]
    ix.remove(rs[3])
    assert 3 not in ix.tree
