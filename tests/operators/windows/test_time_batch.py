"""Time batch window (Esper ref. 14.3.5, 14.2; conformance window_time_batch*)."""

from __future__ import annotations

from tests.operators.harness import P, T, W


def ev(i: int) -> dict:
    return {"id": f"e{i}", "price": 1.0}


def test_time_batch_no_reference_point(harness) -> None:
    h = harness(W("time_batch", T(3000)))
    e1, e2, e3 = ev(1), ev(2), ev(3)
    assert h.at(0, e1) == ([], [])
    assert h.advance(2999) == []
    assert h.advance(3000) == [(3000, [e1], [])]
    assert h.advance(6000) == [(6000, [], [e1])]
    assert h.at(7000, e2) == ([], [])
    assert h.advance(9000) == [(9000, [e2], [])]
    assert h.advance(12000) == [(12000, [], [e2])]
    assert h.advance(15000) == []
    assert h.view.next_timer() is None  # As Esper does: stops until the next event
    h.at(16000, e3)
    assert h.advance(17999) == []
    assert h.advance(18000) == [(18000, [e3], [])]  # the grid of the first event is kept


def test_time_batch_reference_point(harness) -> None:
    h = harness(W("time_batch", T(5000), P(1000, "1000L")))
    e1, e2, e3 = ev(1), ev(2), ev(3)
    h.at(2000, e1)
    h.at(5000, e2)
    assert h.advance(5999) == []
    assert h.advance(6000) == [(6000, [e1, e2], [])]
    h.at(6500, e3)
    assert h.advance(10999) == []
    assert h.advance(11000) == [(11000, [e3], [e1, e2])]
    assert h.advance(16000) == [(16000, [], [e3])]
    assert h.advance(21000) == []


def test_time_batch_flow_control(harness) -> None:
    plain = harness(W("time_batch", T(5000)))
    force = harness(W("time_batch", T(5000), P("FORCE_UPDATE")))
    eager = harness(W("time_batch", T(5000), P("FORCE_UPDATE, START_EAGER")))
    e1 = ev(1)
    assert plain.advance(5000) == [] and force.advance(5000) == []
    assert eager.advance(5000) == [(5000, [], [])]
    for h in (plain, force, eager):
        assert h.at(6000, e1) == ([], [])
    assert eager.advance(10000) == [(10000, [e1], [])]
    assert plain.advance(11000) == [(11000, [e1], [])]
    assert force.advance(11000) == [(11000, [e1], [])]
    assert eager.advance(15000) == [(15000, [], [e1])]
    assert plain.advance(16000) == [(16000, [], [e1])]
    assert force.advance(16000) == [(16000, [], [e1])]
    assert eager.advance(26000) == [(20000, [], []), (25000, [], [])]
    assert plain.advance(26000) == []
    assert force.advance(26000) == [(21000, [], []), (26000, [], [])]


def test_time_batch_start_eager_alone_posts_empty_intervals(harness) -> None:
    # Esper ref. 14.3.5: START_EAGER posts empty result sets 'as when using FORCE_UPDATE'
    h = harness(W("time_batch", T(1000), P("START_EAGER")), start_ms=500)
    assert h.advance(3500) == [(1500, [], []), (2500, [], []), (3500, [], [])]


def test_time_batch_reference_point_with_flow_control(harness) -> None:
    # FORCE_UPDATE alone keeps the configured reference point
    h = harness(W("time_batch", T(5000), P(1000, "1000L"), P("FORCE_UPDATE")))
    e1 = ev(1)
    assert h.at(2000, e1) == ([], [])
    assert h.advance(11000) == [(6000, [e1], []), (11000, [], [e1])]


def test_time_batch_start_eager_ignores_reference_point(harness) -> None:
    # As Esper 9's TimeBatchView: START_EAGER sets the reference point to the view's start
    # time, the configured one is never read (scenario window_time_batch_refpoint_start_eager)
    h = harness(
        W("time_batch", T(2000), P(700, "700L"), P("FORCE_UPDATE, START_EAGER")), start_ms=300
    )
    e1, e2 = ev(1), ev(2)
    assert h.at(600, e1) == ([], [])
    assert h.advance(2300) == [(2300, [e1], [])]
    assert h.at(2700, e2) == ([], [])
    assert h.advance(6300) == [(4300, [e2], [e1]), (6300, [], [e2])]
    eager = harness(W("time_batch", T(2000), P(700, "700L"), P("START_EAGER")))
    assert eager.at(100, e1) == ([], [])
    assert eager.advance(1999) == []
    assert eager.advance(2000) == [(2000, [e1], [])]


def test_time_batch_undo_release_stops_flushing(harness) -> None:
    """A flush the view after the window failed on: the batch is kept and no flush is
    scheduled, nor is one by a later event (Esper schedules only for an empty batch)."""
    h = harness(W("time_batch", T(1000)))
    e1, e2 = ev(1), ev(2)
    assert h.at(0, e1) == ([], [])
    assert h.advance(999) == []
    h.now = h.ctx.now_ms = 1000
    assert h.view.on_time(1000) == ([e1], [])
    assert h.view.undo_release() is True
    assert h.view.next_timer() is None
    assert h.at(1500, e2) == ([], [])
    assert h.view.next_timer() is None
    assert h.contents() == [e1, e2]
