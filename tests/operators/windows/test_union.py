"""retain-union of several data windows (Esper 5.4.4)."""

from __future__ import annotations

import pytest

from tests.operators.harness import P, T, W, X, chain


def ev(i: int, symbol: str = "S") -> dict:
    return {"id": i, "symbol": symbol}


def test_union_unique_or_time(harness) -> None:
    h = harness(chain(W("unique", X("symbol")), W("time", T(5000)), union=True))
    a1, b1, a2 = ev(1, "A"), ev(2, "B"), ev(3, "A")
    assert h.at(0, a1) == ([a1], [])
    assert h.at(1000, b1) == ([b1], [])
    assert h.at(2000, a2) == ([a2], [])  # a1 left unique but time still holds it
    assert h.advance(10000) == [(5000, [], [a1])]  # b1, a2 stay: unique holds them
    assert h.contents() == [b1, a2]


def test_union_length_or_length(harness) -> None:
    h = harness(chain(W("length", P(1)), W("firstlength", P(2)), union=True))
    a, b, c, d = ev(1), ev(2), ev(3), ev(4)
    assert h.send(a) == ([a], [])
    assert h.send(b) == ([b], [])
    assert h.send(c) == ([c], [])  # b leaves length(1) but firstlength keeps a, b
    assert h.send(d) == ([d], [c])
    assert h.send(old=[a]) == ([], [a])


def test_union_rejects_batch_windows() -> None:
    with pytest.raises(ValueError, match="retain-union"):
        chain(W("length_batch", P(2)), W("time", T(1000)), union=True)
