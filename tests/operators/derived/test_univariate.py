"""Univariate statistics derived-value window (Esper ref. 14.4.2; conformance window_uni)."""

from __future__ import annotations

import math

from tests.operators.harness import P, W, X, chain


def test_uni_over_length_three(harness) -> None:
    h = harness(chain(W("length", P(3)), W("uni", X("price"))))
    new, old = h.send({"price": 1.0})
    assert new[0]["datapoints"] == 1 and new[0]["total"] == 1.0 and new[0]["average"] == 1.0
    assert (
        math.isnan(new[0]["variance"])
        and math.isnan(new[0]["stddev"])
        and new[0]["stddevpa"] == 0.0
    )
    assert old[0]["datapoints"] == 0 and math.isnan(old[0]["average"])
    new, old = h.send({"price": 2.0})
    assert new == [
        {
            "datapoints": 2,
            "total": 3.0,
            "average": 1.5,
            "variance": 0.5,
            "stddev": math.sqrt(0.5),
            "stddevpa": 0.5,
        }
    ]
    assert old[0]["datapoints"] == 1
    new, old = h.send({"price": 3.0})
    expected3 = {"datapoints": 3, "total": 6.0, "average": 2.0, "variance": 1.0, "stddev": 1.0}
    assert {k: new[0][k] for k in expected3} == expected3
    assert math.isclose(new[0]["stddevpa"], 0.816496580927726)
    assert old == [
        {
            "datapoints": 2,
            "total": 3.0,
            "average": 1.5,
            "variance": 0.5,
            "stddev": math.sqrt(0.5),
            "stddevpa": 0.5,
        }
    ]
    new, _ = h.send({"price": 4.0})
    assert (new[0]["datapoints"], new[0]["total"], new[0]["average"]) == (3, 9.0, 3.0)
    assert math.isclose(new[0]["variance"], 1.0) and math.isclose(
        new[0]["stddevpa"], 0.816496580927726
    )


def test_uni_extra_properties_of_last_event(harness) -> None:
    h = harness(W("uni", X("price"), X("symbol")))
    new, old = h.send({"price": 5, "symbol": "A"})
    assert new[0]["symbol"] == "A" and old[0]["symbol"] is None
    new, old = h.send({"price": 7, "symbol": "B"})
    assert (new[0]["symbol"], new[0]["total"], old[0]["symbol"]) == ("B", 12.0, "A")
