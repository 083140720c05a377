"""Externally-timed batch window (Esper ref. 14.3.6; conformance window_ext_timed_batch)."""

from __future__ import annotations

from tests.operators.harness import P, T, W, X


def ev(i: int, ts: int) -> dict:
    return {"id": f"e{i}", "ts": ts}


def test_ext_timed_batch_releases_on_arrival_beyond_batch(harness) -> None:
    h = harness(W("ext_timed_batch", X("ts"), T(5000)))
    e1, e2, e3 = ev(1, 1000), ev(2, 3000), ev(3, 5000)
    for e in (e1, e2, e3):
        assert h.send(e) == ([], [])
    assert h.advance(300000) == []
    e4, e5, e6 = ev(4, 7000), ev(5, 9000), ev(6, 13000)
    assert h.send(e4) == ([e1, e2, e3], [])
    assert h.send(e5) == ([], [])
    assert h.send(e6) == ([e4, e5], [e1, e2, e3])


def test_ext_timed_batch_skips_empty_intervals_and_reference(harness) -> None:
    h = harness(W("ext_timed_batch", X("ts"), T(5000), P(2000, "2000L")))
    a, b, c = ev(1, 3000), ev(2, 7000), ev(3, 30000)
    assert h.send(a) == ([], [])  # batch [2000, 7000) on the reference grid
    assert h.send(b) == ([a], [])
    assert h.send(c) == ([b], [a])  # [12000, 27000) held nothing: not posted
    assert h.send(ev(4, 31999)) == ([], [])
    assert h.send(ev(5, 32000))[1] == [b]


def test_ext_timed_batch_two_releases_in_one_update(harness) -> None:
    h = harness(W("ext_timed_batch", X("ts"), T(1000)))
    a, b, c, d = ev(1, 0), ev(2, 1500), ev(3, 2500), ev(4, 2600)
    h.send(a)
    assert h.send(b, c, d) == ([a, b], [])
    assert h.send(ev(5, 3000)) == ([c, d], [a, b])


def test_ext_timed_batch_drops_null_timestamp(harness) -> None:
    # Esper 9's view fails to unbox a null timestamp: the event never enters the batch
    # (scenario window_null_timestamp_timetolive_ext_timed_batch)
    h = harness(W("ext_timed_batch", X("ts"), T(2000)))
    n = {"id": "n", "ts": None}
    a, b, c = ev(1, 1000), ev(2, 3000), ev(3, 5000)
    assert h.send(n) == ([], [])  # sets no reference point either
    assert h.send(a) == ([], [])
    assert h.send(n) == ([], [])
    assert h.contents() == [a]
    assert h.send(b, n) == ([a], [])
    assert h.send(n, c) == ([b], [a])
