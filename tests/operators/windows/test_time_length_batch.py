"""Time-length combination batch window (Esper 14.3.7; conformance window_time_length_batch)."""

from __future__ import annotations

from tests.operators.harness import P, T, W


def ev(i: int) -> dict:
    return {"id": f"e{i}", "price": 1.0}


def test_time_length_batch_count_release_restarts_interval(harness) -> None:
    h = harness(W("time_length_batch", T(5000), P(3)))
    e = [ev(i) for i in range(1, 6)]
    assert h.at(1000, e[0]) == ([], [])
    assert h.at(2000, e[1]) == ([], [])
    assert h.at(3000, e[2]) == ([e[0], e[1], e[2]], [])
    assert h.at(4000, e[3]) == ([], [])
    assert h.advance(7000) == []
    assert h.advance(8000) == [(8000, [e[3]], [e[0], e[1], e[2]])]
    assert h.advance(13000) == [(13000, [], [e[3]])]
    assert h.advance(18000) == []
    assert h.view.next_timer() is None
    assert h.at(20000, e[4]) == ([], [])
    assert h.advance(24999) == []
    assert h.advance(25000) == [(25000, [e[4]], [])]


def test_time_length_batch_flow_control(harness) -> None:
    h = harness(W("time_length_batch", T(10000), P(5), P("FORCE_UPDATE, START_EAGER")))
    assert h.advance(20000) == [(10000, [], []), (20000, [], [])]
    a = ev(1)
    h.at(21000, a)
    assert h.advance(40000) == [(30000, [a], []), (40000, [], [a])]
    force = harness(W("time_length_batch", T(10000), P(5), P("FORCE_UPDATE")))
    assert force.advance(30000) == []
    force.at(31000, a)
    assert force.advance(61000) == [(41000, [a], []), (51000, [], [a]), (61000, [], [])]


def test_time_length_batch_undo_release_waits_for_an_event(harness) -> None:
    """A release the view after the window failed on: the batch is kept with no timer;
    the next event starts the interval again (or releases when the batch is full)."""
    h = harness(W("time_length_batch", T(1000), P(3)))
    a, b, c, d = ({"id": x} for x in "abcd")
    assert h.at(0, a, b) == ([], [])
    assert h.advance(999) == []
    h.now = h.ctx.now_ms = 1000
    assert h.view.on_time(1000) == ([a, b], [])
    assert h.view.undo_release() is True
    assert h.view.next_timer() is None
    assert h.at(1500, c) == ([a, b, c], [])
    assert h.at(1600, d) == ([], [])
    assert h.view.next_timer() == 2500
