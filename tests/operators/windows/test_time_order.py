"""Time-order and time-to-live windows (Esper ref. 14.3.21 Time-Order Window, 14.3.22)."""

from __future__ import annotations

from tests.operators.harness import T, W, X


def test_time_order_releases_in_timestamp_order(harness) -> None:
    h = harness(W("time_order", X("ts"), T(10000)))
    e1, e2, e3, e4 = (
        {"id": f"e{i}", "ts": ts} for i, ts in [(1, 19000), (2, 17000), (3, 18000), (4, 9000)]
    )
    assert h.at(20000, e1) == ([e1], [])
    assert h.at(20500, e2) == ([e2], [])
    assert h.at(21000, e3) == ([e3], [])
    assert h.at(21500, e4) == ([e4], [e4])
    assert h.advance(26500) == []
    assert h.contents() == [e2, e3, e1]
    assert h.advance(30000) == [(27000, [], [e2]), (28000, [], [e3]), (29000, [], [e1])]


def test_timetolive(harness) -> None:
    h = harness(W("timetolive", X("expireAt")))
    e1, e2, e3, e4 = (
        {"id": f"e{i}", "expireAt": x} for i, x in [(1, 5000), (2, 1000), (3, 2000), (4, 4000)]
    )
    assert h.at(1000, e1) == ([e1], [])
    assert h.at(1500, e2) == ([e2], [e2])
    assert h.at(2000, e3) == ([e3], [e3])
    assert h.at(2500, e4) == ([e4], [])
    assert h.advance(3999) == []
    assert h.advance(5000) == [(4000, [], [e4]), (5000, [], [e1])]


def test_time_order_upstream_removal(harness) -> None:
    h = harness(W("time_order", X("ts"), T(1000)))
    a, b = {"id": "a", "ts": 100}, {"id": "b", "ts": 50}
    h.send(a, b)
    assert h.send(old=[a]) == ([], [a])
    assert h.advance(2000) == [(1050, [], [b])]


def test_time_order_and_timetolive_drop_null_timestamp(harness) -> None:
    # Esper 9's view fails to unbox a null timestamp: the event never enters, nothing is
    # posted for it (scenario window_null_timestamp_*)
    order = harness(W("time_order", X("ts"), T(1000)))
    ttl = harness(W("timetolive", X("ts")))
    a, n, b = {"id": "a", "ts": 2000}, {"id": "n", "ts": None}, {"id": "b", "ts": 2500}
    for h in (order, ttl):
        assert h.at(500, n) == ([], [])
        assert h.send(a, n, b) == ([a, b], [])
        assert h.contents() == [a, b]
        assert h.view.count() == 2
    assert order.advance(4000) == [(3000, [], [a]), (3500, [], [b])]
    assert ttl.advance(4000) == [(2000, [], [a]), (2500, [], [b])]
