"""Regression derived-value window linest (Esper ref. 14.4.3 Regression Derived-Value Window)."""

from __future__ import annotations

import math

from tests.operators.harness import P, W, X, chain


def test_linest_slope_and_intercept(harness) -> None:
    h = harness(chain(W("length", P(3)), W("linest", X("x"), X("y"))))
    h.send({"x": 1.0, "y": 3.0})
    h.send({"x": 2.0, "y": 5.0})
    new, old = h.send({"x": 3.0, "y": 7.0})
    row = new[0]
    assert math.isclose(row["slope"], 2.0) and math.isclose(row["YIntercept"], 1.0)
    assert (row["dataPoints"], row["n"], row["XSum"], row["YSum"]) == (3, 3, 6.0, 15.0)
    assert (row["sumX"], row["sumXSq"], row["sumY"], row["sumYSq"], row["sumXY"]) == (
        6.0,
        14.0,
        15.0,
        83.0,
        34.0,
    )
    assert math.isclose(row["XAverage"], 2.0) and math.isclose(row["YAverage"], 5.0)
    assert math.isclose(row["XVariance"], 1.0) and math.isclose(row["YVariance"], 4.0)
    assert math.isclose(row["XStandardDeviationSample"], 1.0) and math.isclose(
        row["YStandardDeviationSample"], 2.0
    )
    assert math.isclose(row["XStandardDeviationPop"], math.sqrt(2 / 3))
    assert math.isclose(row["YStandardDeviationPop"], math.sqrt(8 / 3))
    assert old[0]["dataPoints"] == 2
    new, _ = h.send({"x": 4.0, "y": 0.0})  # window (2,5),(3,7),(4,0)
    assert math.isclose(new[0]["slope"], -2.5) and math.isclose(new[0]["YIntercept"], 11.5)


def test_linest_single_point_slope_is_nan(harness) -> None:
    h = harness(W("linest", X("x"), X("y")))
    new, _ = h.send({"x": 1.0, "y": 1.0})
    assert math.isnan(new[0]["slope"]) and math.isnan(new[0]["YIntercept"])
