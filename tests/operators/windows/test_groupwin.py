"""Grouped data window (Esper ref. 14.3.15; conformance window_groupwin_length)."""

from __future__ import annotations

from tests.operators.harness import P, T, W, X, chain


def t(symbol: str, price: float) -> dict:
    return {"symbol": symbol, "price": price}


def test_groupwin_length_per_symbol(harness) -> None:
    h = harness(chain(W("groupwin", X("symbol")), W("length", P(2))))
    a1, a2, b10, a3, b20, b30 = t("A", 1), t("A", 2), t("B", 10), t("A", 3), t("B", 20), t("B", 30)
    assert h.send(a1) == ([a1], [])
    assert h.send(a2) == ([a2], [])
    assert h.send(b10) == ([b10], [])
    assert h.send(a3) == ([a3], [a1])
    assert h.send(b20) == ([b20], [])
    assert h.send(b30) == ([b30], [b10])
    assert h.contents() == [a2, a3, b20, b30]
    v = h.view
    assert v.prev(1, a3) == a2 and v.prev(0, b30) == b30 and v.prevtail(0, b30) == b20
    assert v.count(a3) == 2 and v.count() == 4


def test_groupwin_time_timers_per_group(harness) -> None:
    h = harness(chain(W("groupwin", X("symbol")), W("time", T(1000))))
    a, b, c = t("A", 1), t("B", 2), t("A", 3)
    h.at(0, a)
    h.at(500, b)
    h.at(700, c)
    assert h.advance(3000) == [(1000, [], [a]), (1500, [], [b]), (1700, [], [c])]


def test_groupwin_several_rows_and_removal(harness) -> None:
    h = harness(chain(W("groupwin", X("symbol")), W("length", P(1))))
    a1, b1, a2 = t("A", 1), t("B", 1), t("A", 2)
    assert h.send(a1, b1, a2) == ([a1, a2, b1], [a1])
    assert h.send(old=[b1]) == ([], [b1])
    assert h.send(old=[t("Z", 0)]) == ([], [])


def test_groupwin_derived_rows_carry_group_value(harness) -> None:
    h = harness(chain(W("groupwin", X("symbol")), W("size")))
    a1, b1, a2 = t("A", 1), t("B", 1), t("A", 2)
    assert h.send(a1) == ([{"size": 1, "symbol": "A"}], [{"size": 0, "symbol": "A"}])
    assert h.send(b1) == ([{"size": 1, "symbol": "B"}], [{"size": 0, "symbol": "B"}])
    assert h.send(a2) == ([{"size": 2, "symbol": "A"}], [{"size": 1, "symbol": "A"}])


def test_groupwin_merge_then_derived(harness) -> None:
    # Esper ref. 14.3.15: #groupwin(ticker)#length(2)#merge(ticker)#weighted_avg(...) -- one average
    spec = chain(
        W("groupwin", X("symbol")),
        W("length", P(1)),
        W("merge", X("symbol")),
        W("weighted_avg", X("price"), X("volume")),
    )
    h = harness(spec)
    rows = [
        {"symbol": s, "price": p, "volume": 1.0} for s, p in [("A", 10.0), ("B", 20.0), ("A", 30.0)]
    ]
    outs = [h.send(r)[0][0]["average"] for r in rows]
    assert outs == [10.0, 15.0, 25.0]


def test_groupwin_grouped_intersection(harness) -> None:
    # Esper 14.3.15: #groupwin(symbol)#length(4)#time(10) -- last 4 per symbol, not older than 10 s
    h = harness(chain(W("groupwin", X("symbol")), W("length", P(2)), W("time", P(10))))
    a1, a2, a3 = t("A", 1), t("A", 2), t("A", 3)
    h.at(0, a1)
    h.at(1000, a2)
    assert h.at(2000, a3) == ([a3], [a1])
    assert h.advance(12000) == [(11000, [], [a2]), (12000, [], [a3])]


def test_groupwin_time_batch_per_group(harness) -> None:
    h = harness(chain(W("groupwin", X("symbol")), W("time_batch", T(1000))))
    a, b = t("A", 1), t("B", 2)
    h.at(100, a)
    h.at(600, b)
    assert h.advance(2600) == [(1100, [a], []), (1600, [b], []), (2100, [], [a]), (2600, [], [b])]
