"""retain-intersection of several data windows (Esper's default; Esper ref. 14 introduction)."""

from __future__ import annotations

from tests.operators.harness import P, T, W, X, chain


def ev(i: int, symbol: str = "S") -> dict:
    return {"id": i, "symbol": symbol}


def test_length_and_time(harness) -> None:
    h = harness(chain(W("length", P(2)), W("time", T(5000))))
    a, b, c = ev(1), ev(2), ev(3)
    assert h.at(0, a) == ([a], [])
    assert h.at(1000, b) == ([b], [])
    assert h.at(2000, c) == ([c], [a])  # a leaves the length window and hence the intersection
    assert h.advance(10000) == [(6000, [], [b]), (7000, [], [c])]  # a's time expiry is gone
    assert h.contents() == []


def test_unique_and_time_removal_forgets_key(harness) -> None:
    h = harness(chain(W("firstunique", X("symbol")), W("time", T(1000))))
    a1, a2, b1 = ev(1, "A"), ev(2, "A"), ev(3, "B")
    assert h.at(0, a1) == ([a1], [])
    assert h.at(100, a2) == ([], [])  # declined by firstunique: not in the intersection
    assert h.at(200, b1) == ([b1], [])
    assert h.advance(1000) == [(1000, [], [a1])]
    assert h.send(a2) == ([a2], [])  # firstunique forgot A when time removed a1


def test_intersection_with_sort_eviction_of_arrival(harness) -> None:
    h = harness(chain(W("sort", P(1), X("id")), W("keepall")))
    a, b = ev(1), ev(2)
    assert h.send(a) == ([a], [])
    assert h.send(b) == ([b], [b])
    assert h.contents() == [a]


def test_intersection_with_batch_window(harness) -> None:
    h = harness(chain(W("length_batch", P(2)), W("unique", X("symbol"))))
    a1, b1, a2, c1, d1 = ev(1, "A"), ev(2, "B"), ev(3, "A"), ev(4, "C"), ev(5, "D")
    assert h.send(a1) == ([], [])
    assert h.send(b1) == ([a1, b1], [])
    assert h.send(a2) == ([], [a1])  # unique replaces the released a1: it leaves now
    assert h.send(c1) == ([a2, c1], [b1])
    assert h.send(d1) == ([], [])
    e6 = ev(6, "C")
    assert h.send(e6) == ([d1, e6], [a2, c1])


def test_upstream_removal_leaves_every_window(harness) -> None:
    h = harness(chain(W("length", P(5)), W("time", T(5000))))
    a, b = ev(1), ev(2)
    h.send(a, b)
    assert h.send(old=[dict(a)]) == ([], [a])
    assert h.advance(6000) == [(5000, [], [b])]


def test_pending_batch_row_removed_by_other_window_never_posts(harness) -> None:
    h = harness(chain(W("length_batch", P(4)), W("unique", X("symbol"))))
    a1, b1, a2, c1, d1 = ev(1, "A"), ev(2, "B"), ev(3, "A"), ev(4, "C"), ev(5, "D")
    assert h.send(a1) == ([], [])
    assert h.send(b1) == ([], [])
    assert h.send(a2) == ([], [])  # a1 was never posted: it leaves silently
    assert h.send(c1) == ([], [])  # the batch holds 3: a1 no longer counts
    assert h.send(d1) == ([b1, a2, c1, d1], [])


def test_time_batch_in_intersection_keeps_force_update(harness) -> None:
    h = harness(chain(W("time_batch", T(1000), P("FORCE_UPDATE, START_EAGER")), W("keepall")))
    assert h.advance(2000) == [(1000, [], []), (2000, [], [])]
    a = ev(1)
    h.send(a)
    assert h.advance(4000) == [(3000, [a], []), (4000, [], [a])]
