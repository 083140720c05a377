"""Ranked window (Esper ref. 14.3.20 Ranked Window; conformance window_rank)."""

from __future__ import annotations

from tests.operators.harness import P, W, X


def t(symbol: str, price: float) -> dict:
    return {"symbol": symbol, "price": price}


def test_rank_latest_per_symbol_top_two(harness) -> None:
    h = harness(W("rank", X("symbol"), P(2), X("price", descending=True)))
    a10, b20, c5, a30, c25 = t("A", 10), t("B", 20), t("C", 5), t("A", 30), t("C", 25)
    assert h.at(1000, a10) == ([a10], [])
    assert h.send(b20) == ([b20], [])
    assert h.send(c5) == ([c5], [c5])
    assert h.send(a30) == ([a30], [a10])
    assert h.send(c25) == ([c25], [b20])
    assert h.contents() == [a30, c25]


def test_rank_ties_keep_arrival_order_evict_oldest_of_lowest(harness) -> None:
    h = harness(W("rank", X("symbol"), P(2), X("price")))
    a, b, c = t("A", 7), t("B", 7), t("C", 7)
    h.send(a)
    h.send(b)
    assert h.contents() == [a, b]
    assert h.send(c) == ([c], [a])
    assert h.contents() == [b, c]
    # replacing B keeps rank order consistent
    b2 = t("B", 1)
    assert h.send(b2) == ([b2], [b])
    assert h.contents() == [b2, c]
    assert h.send(old=[c]) == ([], [c])
    assert h.contents() == [b2]
