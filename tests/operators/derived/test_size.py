"""Size derived-value window (Esper ref. 14.4.1; conformance window_size)."""

from __future__ import annotations

from operators.windows.registry import WindowParam
from tests.operators.harness import P, T, W, X, chain


def ev(i: int, symbol: str = "S") -> dict:
    return {"id": f"e{i}", "symbol": symbol, "feed": "F"}


def test_size_after_length_posts_only_on_change(harness) -> None:
    h = harness(chain(W("length", P(2)), W("size")))
    assert h.at(1000, ev(1)) == ([{"size": 1}], [{"size": 0}])
    assert h.at(2000, ev(2)) == ([{"size": 2}], [{"size": 1}])
    assert h.at(3000, ev(3)) == ([], [])
    assert h.contents() == [{"size": 2}]
    assert h.view.prev(0) == ev(3)  # prev reads the data window of the chain


def test_size_after_time(harness) -> None:
    h = harness(chain(W("time", T(5000)), W("size")))
    for i, t in enumerate((1000, 2000, 3000), start=1):
        assert h.at(t, ev(i)) == ([{"size": i}], [{"size": i - 1}])
    assert h.advance(8000) == [
        (6000, [{"size": 2}], [{"size": 3}]),
        (7000, [{"size": 1}], [{"size": 2}]),
        (8000, [{"size": 0}], [{"size": 1}]),
    ]


def test_size_alone_counts_and_extra_properties(harness) -> None:
    h = harness(W("size", X("symbol"), X("feed")))
    assert h.send(ev(1, "A")) == (
        [{"size": 1, "symbol": "A", "feed": "F"}],
        [{"size": 0, "symbol": None, "feed": None}],
    )
    assert h.send(ev(2, "B")) == (
        [{"size": 2, "symbol": "B", "feed": "F"}],
        [{"size": 1, "symbol": "A", "feed": "F"}],
    )


def test_size_wildcard(harness) -> None:
    h = harness(W("size", WindowParam("*")))
    row = ev(1)
    assert h.send(row)[0] == [{"size": 1, **row}]
