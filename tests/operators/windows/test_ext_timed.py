"""Externally-timed window (Esper ref. 14.3.4; conformance window_ext_timed)."""

from __future__ import annotations

from tests.operators.harness import T, W, X


def test_ext_timed_slides_by_timestamp_only(harness) -> None:
    h = harness(W("ext_timed", X("ts"), T(10000)))
    e = {
        i: {"id": f"e{i}", "ts": ts}
        for i, ts in [(1, 1000), (2, 5000), (3, 9000), (4, 12000), (5, 25000)]
    }
    assert h.send(e[1]) == ([e[1]], [])
    assert h.send(e[2]) == ([e[2]], [])
    assert h.send(e[3]) == ([e[3]], [])
    assert h.send(e[4]) == ([e[4]], [e[1]])
    assert h.advance(500000) == []
    assert h.send(e[5]) == ([e[5]], [e[2], e[3], e[4]])
    assert h.contents() == [e[5]]


def test_ext_timed_drops_null_timestamp(harness) -> None:
    # Esper 9's view fails to unbox a null timestamp: the event never enters and does not
    # move the window's time (scenario window_null_timestamp_ext_timed_time_order)
    h = harness(W("ext_timed", X("ts"), T(2000)))
    n1, n2 = {"id": "n1", "ts": None}, {"id": "n2", "ts": None}
    a, b, c = {"id": "a", "ts": 1000}, {"id": "b", "ts": 2500}, {"id": "c", "ts": 3000}
    assert h.send(n1) == ([], [])
    assert h.send(a) == ([a], [])
    assert h.send(n2, b) == ([b], [])
    assert h.send(c, n2) == ([c], [a])
    assert h.contents() == [b, c]
