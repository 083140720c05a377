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
