"""Output rows are strict JSON; non-finite doubles travel as strings and come back."""

from __future__ import annotations

import json
import math

from app.runtime.kafka import codec


def strict_loads(data: bytes) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON literal {name}")

    return json.loads(data, parse_constant=refuse)


def test_a_finite_row_is_plain_json() -> None:
    data, nonfinite = codec.encode_row({"a": 1.5, "b": None, "c": [1, "x"]})
    assert (data, nonfinite) == (b'{"a":1.5,"b":null,"c":[1,"x"]}', None)
    assert codec.decode_row(data, nonfinite) == {"a": 1.5, "b": None, "c": [1, "x"]}


def test_non_finite_doubles_are_strings_and_flagged() -> None:
    row = {"n": math.nan, "p": math.inf, "m": -math.inf, "none": None,
           "nested": {"xs": [math.nan, 2.0]}, "s": "NaN"}
    data, nonfinite = codec.encode_row(row)
    assert nonfinite == b'["n","p","m","nested"]'
    assert strict_loads(data) == {"n": "NaN", "p": "Infinity", "m": "-Infinity",
                                  "none": None, "nested": {"xs": ["NaN", 2.0]}, "s": "NaN"}
    back = codec.decode_row(data, nonfinite)
    assert math.isnan(back["n"]) and back["p"] == math.inf and back["m"] == -math.inf
    assert back["none"] is None and math.isnan(back["nested"]["xs"][0])
    assert back["nested"]["xs"][1] == 2.0
    assert back["s"] == "NaN"  # a string stays a string


def test_the_nan_scan_sees_nested_values_only_as_floats() -> None:
    assert codec._non_finite({"a": [{"b": (1.0, math.inf)}]})
    assert not codec._non_finite({"a": "inf", "b": "nan", "c": None, "d": [None, 1]})
