"""Time-accumulating window (Esper ref. 14.3.8; conformance window_time_accum)."""

from __future__ import annotations

from tests.operators.harness import T, W


def test_time_accum_expires_all_after_quiet_period(harness) -> None:
    h = harness(W("time_accum", T(5000)))
    e = [{"id": f"e{i}"} for i in range(1, 5)]
    assert h.at(1000, e[0]) == ([e[0]], [])
    assert h.at(3000, e[1]) == ([e[1]], [])
    assert h.at(7000, e[2]) == ([e[2]], [])
    assert h.advance(11999) == []
    assert h.advance(12000) == [(12000, [], [e[0], e[1], e[2]])]
    assert h.at(13000, e[3]) == ([e[3]], [])
    assert h.advance(20000) == [(18000, [], [e[3]])]
