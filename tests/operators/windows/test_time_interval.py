"""SPL timeInterval panes (IBM Streams SPL; conformance spl_time_interval_*)."""

from __future__ import annotations

from tests.operators.harness import T, W, X, chain


def spec():
    return W("time_interval", X("ts"), T(10000), T(5000), T(15000))


def r(id_: str, ts: int, **kw) -> dict:
    return {"id": id_, "ts": ts, **kw}


def pane(row: dict, start: int) -> dict:
    return {**row, "pane_start": start, "pane_end": start + 10000}


def flat(fired: list) -> list:
    """All rows emitted by the clock moves, asserting nothing is ever old."""
    out = []
    for _, new, old in fired:
        assert old == []
        out.extend(new)
    return out


def test_panes(harness) -> None:
    h = harness(spec())
    a, b, c, d = r("a", 7000), r("b", 8000), r("c", 11000), r("d", 23000)
    assert h.at(7000, a) == ([], [])
    assert h.at(8000, b) == ([], [])
    assert flat(h.advance(9999)) == []
    assert flat(h.advance(10000)) == [pane(a, 0), pane(b, 0)]
    h.at(11000, c)
    assert flat(h.advance(14000)) == []
    assert flat(h.advance(15000)) == [pane(a, 5000), pane(b, 5000), pane(c, 5000)]
    assert flat(h.advance(21000)) == [pane(c, 10000)]
    h.send(d)
    assert flat(h.advance(24000)) == []
    assert flat(h.advance(36000)) == [pane(d, 15000), pane(d, 20000)]
    assert flat(h.advance(60000)) == []
    assert h.view.next_timer() is None  # every pane closed


def test_late_tuples_retrigger_and_closed_panes_ignore(harness) -> None:
    h = harness(spec())
    a, b, c, d = r("a", 7000), r("b", 8000), r("c", 9000), r("d", 9500)
    h.at(7000, a)
    assert flat(h.advance(10000)) == [pane(a, 0)]
    h.at(12000, b)
    assert h.advance(13000) == [(12001, [pane(a, 0), pane(b, 0)], [])]
    assert flat(h.advance(14000)) == []
    assert flat(h.advance(15000)) == [pane(a, 5000), pane(b, 5000)]
    assert flat(h.advance(20000)) == []
    assert flat(h.advance(27000)) == []
    h.send(c)
    assert flat(h.advance(28000)) == [pane(a, 5000), pane(b, 5000), pane(c, 5000)]
    assert flat(h.advance(40000)) == []
    h.send(d)
    assert flat(h.advance(41000)) == []


def test_partitioned_panes(harness) -> None:
    h = harness(chain(W("groupwin", X("sensor")), spec()))
    a1, b1, a2 = r("a1", 6000, sensor="A"), r("b1", 16000, sensor="B"), r("a2", 9000, sensor="A")
    h.at(6000, a1)
    assert flat(h.advance(10000)) == [pane(a1, 0)]
    assert flat(h.advance(15000)) == [pane(a1, 5000)]
    h.at(16000, b1)
    assert flat(h.advance(19999)) == []
    assert flat(h.advance(20000)) == [pane(b1, 10000)]
    h.at(21000, a2)
    assert flat(h.advance(22000)) == [pane(a1, 0), pane(a2, 0), pane(a1, 5000), pane(a2, 5000)]
    assert flat(h.advance(24999)) == []
    assert flat(h.advance(25000)) == [pane(b1, 15000)]
    assert flat(h.advance(26000)) == []


def test_late_tuple_creating_a_complete_pane_and_offset(harness) -> None:
    h = harness(W("time_interval", X("ts"), T(10000), T(10000), T(0), T(3000)))
    a = r("a", 5000)  # pane [3000, 13000)
    h.at(13000, a)
    assert h.advance(14000) == [(13001, [{**a, "pane_start": 3000, "pane_end": 13000}], [])]
    assert h.view.next_timer() is None  # discard age 0: closed right after
