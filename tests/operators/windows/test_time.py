"""Sliding time window (Esper 14.3.3; Esper 2.4 walk-through; keepall_and_namespaces timings)."""

from __future__ import annotations

from tests.operators.harness import P, T, W


def test_time_walkthrough(harness) -> None:
    h = harness(W("time", T(4000)))
    w1, w2, w3 = {"id": "W1"}, {"id": "W2"}, {"id": "W3"}
    assert h.at(4000, w1) == ([w1], [])
    assert h.at(5000, w2) == ([w2], [])
    assert h.at(6500, w3) == ([w3], [])
    assert h.advance(7999) == []
    assert h.advance(8000) == [(8000, [], [w1])]
    assert h.advance(20000) == [(9000, [], [w2]), (10500, [], [w3])]
    assert h.view.next_timer() is None


def test_time_seconds_number_and_same_instant_expiry(harness) -> None:
    h = harness(W("time", P(5)))  # #time(5) = 5 seconds
    a, b, c = {"id": "a"}, {"id": "b"}, {"id": "c"}
    h.at(1000, a, b)
    h.at(2000, c)
    # events expiring at the same instant leave together (as Esper's clock fires them)
    assert h.advance(7000) == [(6000, [], [a, b]), (7000, [], [c])]


def test_time_upstream_removal_and_prev(harness) -> None:
    h = harness(W("time", T(5000)))
    a, b = {"id": "a"}, {"id": "b"}
    h.at(1000, a)
    h.at(2000, b)
    assert h.view.prev(0) == b and h.view.prevtail(0) == a
    assert h.send(old=[a]) == ([], [a])
    assert h.view.next_timer() == 7000
    assert h.advance(7000) == [(7000, [], [b])]
