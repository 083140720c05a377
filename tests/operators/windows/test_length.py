"""Length and last-event windows (Esper ref. 14.3.1, 14.3.16; Esper ref. 2 walk-through)."""

from __future__ import annotations

from tests.operators.harness import P, W


def ev(i: int, amount: float = 100.0) -> dict:
    return {"id": f"W{i}", "amount": amount}


def test_length_walkthrough_w1_leaves_on_w6(harness) -> None:
    h = harness(W("length", P(5)))
    rows = [ev(i, a) for i, a in zip(range(1, 8), [500, 100, 200, 100, 100, 300, 50], strict=True)]
    for r in rows[:5]:
        assert h.send(r) == ([r], [])
    assert h.send(rows[5]) == ([rows[5]], [rows[0]])
    assert h.send(rows[6]) == ([rows[6]], [rows[1]])
    assert h.contents() == rows[2:]
    assert h.advance(10**9) == []


def test_length_prev_and_prevtail(harness) -> None:
    h = harness(W("length", P(3)))
    rows = [ev(i) for i in range(5)]
    for r in rows:
        h.send(r)
    v = h.view
    assert [v.prev(i) for i in range(4)] == [rows[4], rows[3], rows[2], None]
    assert [v.prevtail(i) for i in range(4)] == [rows[2], rows[3], rows[4], None]
    assert v.count() == 3


def test_length_posts_the_same_row_object_on_both_streams(tmp_path) -> None:
    from tests.operators.harness import Harness

    h = Harness(W("length", P(1)), "memory", tmp_path)
    a, b = ev(1), ev(2)
    assert h.send(a)[0][0] is a
    assert h.send(b)[1][0] is a


def test_length_several_rows_in_one_update(harness) -> None:
    h = harness(W("length", P(2)))
    a, b, c, d = (ev(i) for i in range(4))
    assert h.send(a, b, c) == ([a, b, c], [a])
    assert h.send(d) == ([d], [b])


def test_length_upstream_remove_stream(harness) -> None:
    h = harness(W("length", P(3)))
    a, b, c, d = (ev(i) for i in range(4))
    h.send(a, b, c)
    assert h.send(old=[dict(b)]) == ([], [b])
    assert h.send(d) == ([d], [])
    assert h.contents() == [a, c, d]


def test_lastevent_is_length_one(harness) -> None:
    h = harness(W("lastevent"))
    e1, e2, e3 = ({"id": f"e{i}"} for i in range(1, 4))
    assert h.send(e1) == ([e1], [])
    assert h.send(e2) == ([e2], [e1])
    assert h.send(e3) == ([e3], [e2])
    assert h.advance(600000) == []
    assert h.contents() == [e3]
