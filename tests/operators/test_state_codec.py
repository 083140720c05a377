"""The state value codec: compact JSON that round-trips what the engine keeps."""

from __future__ import annotations

import math
from typing import Any

import pytest

from operators.state import decode_value, encode_value


@pytest.mark.parametrize(("value", "encoded"), [
    ({"n": 3, "s": [1.5, None], "k": "x"}, b'{"n":3,"s":[1.5,null],"k":"x"}'),
    ([1, 2], b"[1,2]"),
    ("inflation", b'"inflation"'),
    ({"a": float("inf")}, b' {"a":Infinity}'),     # orjson would write null
    ({1: "one"}, b' {"1":"one"}'),                  # integer key: as the standard library
    ([2 ** 70], b" [1180591620717411303424]"),       # beyond 64 bits
])
def test_encoded_bytes(value: Any, encoded: bytes) -> None:
    assert encode_value(value) == encoded


@pytest.mark.parametrize("value", [
    {"n": 3, "s": [1.5, None]}, [None, -math.inf], 2 ** 70, [2 ** 70, 1], "nan", None,
])
def test_round_trip(value: Any) -> None:
    assert decode_value(encode_value(value)) == value


def test_nan_round_trips() -> None:
    got = decode_value(encode_value({"x": float("nan"), "y": None}))
    assert math.isnan(got["x"]) and got["y"] is None
