"""Unique window (Esper ref. 14.3.14 Unique Window; conformance window_unique)."""

from __future__ import annotations

from tests.operators.harness import W, X


def t(symbol: str, price: float, feed: str = "f") -> dict:
    return {"symbol": symbol, "price": price, "feed": feed}


def test_unique_replaces_per_symbol(harness) -> None:
    h = harness(W("unique", X("symbol")))
    a10, b20, a11, c5, b22 = t("A", 10), t("B", 20), t("A", 11), t("C", 5), t("B", 22)
    assert h.at(1000, a10) == ([a10], [])
    assert h.send(b20) == ([b20], [])
    assert h.send(a11) == ([a11], [a10])
    assert h.send(c5) == ([c5], [])
    assert h.send(b22) == ([b22], [b20])
    assert h.contents() == [a11, c5, b22]
    assert h.view.count() == 3


def test_unique_composite_key_and_removal(harness) -> None:
    h = harness(W("unique", X("symbol"), X("feed")))
    a1, a2, a3 = t("A", 1, "x"), t("A", 2, "y"), t("A", 3, "x")
    h.send(a1, a2)
    assert h.send(a3) == ([a3], [a1])
    assert h.send(old=[a1]) == ([], [])  # not the held event of its key
    assert h.send(old=[a2]) == ([], [a2])
    assert h.contents() == [a3]


def test_unique_null_key_is_a_key(harness) -> None:
    h = harness(W("unique", X("symbol")))
    n1, n2 = {"symbol": None, "price": 1}, {"symbol": None, "price": 2}
    h.send(n1)
    assert h.send(n2) == ([n2], [n1])
