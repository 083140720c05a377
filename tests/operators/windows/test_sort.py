"""Sorted window (Esper ref. 14.3.19 Sorted Window; conformance window_sort)."""

from __future__ import annotations

from tests.operators.harness import P, W, X


def ev(i: int, price: float, symbol: str = "S") -> dict:
    return {"id": f"e{i}", "price": price, "symbol": symbol}


def test_sort_keeps_top_three_prices(harness) -> None:
    h = harness(W("sort", P(3), X("price", descending=True)))
    e1, e2, e3, e4, e5, e6 = ev(1, 10), ev(2, 30), ev(3, 20), ev(4, 5), ev(5, 25), ev(6, 40)
    assert h.send(e1) == ([e1], [])
    assert h.send(e2) == ([e2], [])
    assert h.send(e3) == ([e3], [])
    assert h.send(e4) == ([e4], [e4])
    assert h.send(e5) == ([e5], [e1])
    assert h.send(e6) == ([e6], [e3])
    assert h.contents() == [e6, e2, e5]
    assert h.view.prev(0) == e6 and h.view.prevtail(0) == e5


def test_sort_ties_newest_first_oldest_evicted(harness) -> None:
    h = harness(W("sort", P(2), X("price")))
    a, b, c = ev(1, 5), ev(2, 5), ev(3, 5)
    h.send(a)
    h.send(b)
    assert h.contents() == [b, a]
    assert h.send(c) == ([c], [a])
    assert h.contents() == [c, b]


def test_sort_several_criteria_with_strings_desc_and_nulls(harness) -> None:
    h = harness(W("sort", P(4), X("price"), X("symbol", descending=True)))
    a, b, c, d = ev(1, 1, "A"), ev(2, 1, "B"), ev(3, None, "C"), ev(4, 2, None)
    for r in (a, b, c, d):
        h.send(r)
    assert h.contents() == [c, b, a, d]
