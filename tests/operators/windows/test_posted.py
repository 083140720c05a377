"""``posted()``: the rows a view has posted and not taken back, which is what a join's
index or a subquery rebuilds from after a restore.  For every kind of window it must
equal the mirror a consumer keeps of the view's insert and remove streams, also when
the view is rebuilt from its state before every step (batch windows: the last released
batch, never the batch being collected, Esper ref. 14.2)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from operators.base import Row, Rows
from tests.operators.harness import P, T, W, X, chain

SPECS = {
    "length": lambda: W("length", P(2)),
    "time": lambda: W("time", T(1000)),
    "keepall": lambda: W("keepall"),
    "unique": lambda: W("unique", X("k")),
    "lastevent": lambda: W("lastevent"),
    "firstlength": lambda: W("firstlength", P(2)),
    "sort": lambda: W("sort", P(2), X("v")),
    "time_accum": lambda: W("time_accum", T(1000)),
    "length_batch": lambda: W("length_batch", P(3)),
    "time_batch": lambda: W("time_batch", T(1000)),
    "time_length_batch": lambda: W("time_length_batch", T(1000), P(3)),
    "ext_timed_batch": lambda: W("ext_timed_batch", X("ts"), T(1000)),
    "groupwin_length_batch": lambda: chain(W("groupwin", X("k")), W("length_batch", P(2))),
    "groupwin_time_batch": lambda: chain(W("groupwin", X("k")), W("time_batch", T(1000))),
    "intersection_batch": lambda: chain(W("length_batch", P(3)), W("unique", X("k"))),
    "intersection": lambda: chain(W("length", P(3)), W("unique", X("k"))),
}

EVENTS = [(100, "a", 1), (200, "b", 2), (300, "a", 3), (900, "b", 4), (1100, "a", 5),
          (1200, "c", 6), (1250, "a", 7), (2500, "b", 8), (2600, "b", 9), (2700, "a", 10),
          (2800, "c", 11), (4000, "a", 12)]


def _key(row: Row) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _apply(mirror: Counter[str], new: Rows, old: Rows) -> None:
    # entering rows first: a row taken and evicted in one update is in both lists
    for r in new:
        mirror[_key(r)] += 1
    for r in old:
        k = _key(r)
        assert mirror[k] > 0, f"{r} taken back but never posted"
        mirror[k] -= 1
    mirror += Counter()  # drop zero counts


@pytest.mark.parametrize("name", sorted(SPECS))
def test_posted_is_what_the_streams_left(harness: Any, name: str) -> None:
    h = harness(SPECS[name]())
    mirror: Counter[str] = Counter()
    for t, k, v in EVENTS:
        for _, new, old in h.advance(t):
            _apply(mirror, new, old)
        h._step()
        assert Counter(_key(r) for r in h.view.posted()) == mirror, f"before {v}"
        _apply(mirror, *h.send({"k": k, "v": v, "ts": t}))
        h._step()
        assert Counter(_key(r) for r in h.view.posted()) == mirror, f"after {v}"
    for _, new, old in h.advance(6000):
        _apply(mirror, new, old)
    assert Counter(_key(r) for r in h.view.posted()) == mirror


def test_batch_window_posted_is_the_released_batch_not_its_contents(harness: Any) -> None:
    h = harness(W("length_batch", P(2)))
    h.send({"v": 1})
    assert [r["v"] for r in h.view.posted()] == [] and [r["v"] for r in h.contents()] == [1]
    h.send({"v": 2})
    h.send({"v": 3})
    assert [r["v"] for r in h.view.posted()] == [1, 2]
    assert [r["v"] for r in h.contents()] == [3]
