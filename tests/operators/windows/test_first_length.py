"""First-length and first-event windows (Esper ref. 14.3.10 First Length Window, 14.3.17)."""

from __future__ import annotations

from tests.operators.harness import P, W


def test_firstlength_keeps_first_two(harness) -> None:
    h = harness(W("firstlength", P(2)))
    e = [{"id": f"e{i}"} for i in range(1, 5)]
    assert h.at(1000, e[0]) == ([e[0]], [])
    assert h.at(2000, e[1]) == ([e[1]], [])
    assert h.at(3000, e[2]) == ([], [])
    assert h.at(5500, e[3]) == ([], [])
    assert h.advance(600000) == []
    assert h.contents() == [e[0], e[1]]
    # an upstream removal frees room for the next arrival
    assert h.send(old=[e[0]]) == ([], [e[0]])
    assert h.send(e[3]) == ([e[3]], [])


def test_firstevent_keeps_only_the_first(harness) -> None:
    h = harness(W("firstevent"))
    e = [{"id": f"e{i}"} for i in range(1, 4)]
    assert h.at(1000, e[0]) == ([e[0]], [])
    assert h.send(e[1]) == ([], [])
    assert h.send(e[2]) == ([], [])
    assert h.advance(600000) == []
    assert h.contents() == [e[0]]
