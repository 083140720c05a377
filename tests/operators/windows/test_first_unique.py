"""First-unique window (Esper ref. 14.3.18 First Unique Window; conformance window_firstunique)."""

from __future__ import annotations

from tests.operators.harness import W, X


def t(symbol: str, price: float) -> dict:
    return {"symbol": symbol, "price": price}


def test_firstunique_keeps_first_per_symbol(harness) -> None:
    h = harness(W("firstunique", X("symbol")))
    a10, b20, a11, c5, b22 = t("A", 10), t("B", 20), t("A", 11), t("C", 5), t("B", 22)
    assert h.at(1000, a10) == ([a10], [])
    assert h.send(b20) == ([b20], [])
    assert h.send(a11) == ([], [])
    assert h.send(c5) == ([c5], [])
    assert h.send(b22) == ([], [])
    assert h.contents() == [a10, b20, c5]
    # Esper ref. 14.3.18: after a deletion the next event of that key is retained
    assert h.send(old=[a10]) == ([], [a10])
    assert h.send(a11) == ([a11], [])
