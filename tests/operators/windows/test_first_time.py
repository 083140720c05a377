"""First-time window (Esper ref. 14.3.11; conformance window_firstlength_firsttime)."""

from __future__ import annotations

from tests.operators.harness import T, W


def test_firsttime_keeps_events_of_first_five_seconds(harness) -> None:
    h = harness(W("firsttime", T(5000)), start_ms=0)
    e = [{"id": f"e{i}"} for i in range(1, 6)]
    assert h.at(1000, e[0]) == ([e[0]], [])
    assert h.at(2000, e[1]) == ([e[1]], [])
    assert h.at(3000, e[2]) == ([e[2]], [])
    assert h.at(4999, e[3]) == ([e[3]], [])
    assert h.at(5000, e[4]) == ([], [])
    assert h.advance(600000) == []
    assert h.contents() == e[:4]


def test_firsttime_starts_at_creation(harness) -> None:
    h = harness(W("firsttime", T(1000)), start_ms=10000)
    a = {"id": "a"}
    assert h.at(10999, a) == ([a], [])
    assert h.at(11000, {"id": "b"}) == ([], [])
