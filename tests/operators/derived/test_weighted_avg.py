"""Weighted average derived-value window (Esper ref. 14.4.5; conformance window_weighted_avg)."""

from __future__ import annotations

import math

from tests.operators.harness import P, W, X, chain


def test_weighted_avg_over_last_three(harness) -> None:
    h = harness(chain(W("length", P(3)), W("weighted_avg", X("price"), X("volume"))))
    trades = [(10.0, 1.0), (20.0, 3.0), (30.0, 4.0), (40.0, 2.0)]
    outs = [h.send({"price": p, "volume": v}) for p, v in trades]
    assert [o[0][0]["average"] for o in outs] == [10.0, 17.5, 23.75, 28.88888888888889]
    assert math.isnan(outs[0][1][0]["average"])
    assert [o[1][0]["average"] for o in outs[1:]] == [10.0, 17.5, 23.75]


def test_weighted_avg_with_symbol_and_wildcard(harness) -> None:
    from operators.windows.registry import WindowParam

    h = harness(W("weighted_avg", X("price"), X("volume"), X("symbol"), WindowParam("*")))
    row = {"price": 2.0, "volume": 2.0, "symbol": "GE"}
    assert h.send(row)[0] == [{"average": 2.0, "symbol": "GE", "price": 2.0, "volume": 2.0}]
