"""Correlation derived-value window correl (Esper ref. 14.4.4 Correlation Derived-Value Window)."""

from __future__ import annotations

import math

from tests.operators.harness import P, W, X, chain


def test_correlation(harness) -> None:
    h = harness(chain(W("length", P(3)), W("correl", X("x"), X("y"))))
    new, old = h.send({"x": 1.0, "y": 2.0})
    assert math.isnan(new[0]["correlation"]) and math.isnan(old[0]["correlation"])
    assert math.isclose(h.send({"x": 2.0, "y": 4.0})[0][0]["correlation"], 1.0)
    assert math.isclose(h.send({"x": 3.0, "y": 1.0})[0][0]["correlation"], -0.3273268353539886)
    assert math.isclose(
        h.send({"x": 4.0, "y": -1.0})[0][0]["correlation"], -0.9933992677987828
    )  # statistics.correlation([2, 3, 4], [4, 1, -1])
