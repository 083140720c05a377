"""Java hash codes and HashMap buckets, the order Esper iterates a ``#unique`` window."""

from __future__ import annotations

import pytest

from operators.windows.java_order import bucket, java_hash


@pytest.mark.parametrize(("value", "code"), [
    ("hello", 99162322),            # String.hashCode
    ("", 0),
    ("x", 120),
    ("\u00e9t\u00e9", 227742),      # UTF-16 code units
    ("\U0001f600", 1772899),       # a surrogate pair: two units
    (7, 7),                         # Long.hashCode of a small value
    (-1, 0),                        # (int)(v ^ (v >>> 32))
    (1 << 40, 256),
    (1.5, 1073217536),              # Double.hashCode
    (True, 1231),
    (False, 1237),
    (None, 0),
    (("a", 1), 31 * 97 + 1),        # a multi-key combines with 31
])
def test_java_hash(value: object, code: int) -> None:
    assert java_hash(value) == code


def test_buckets_spread_the_hash_and_grow_with_the_map() -> None:
    assert [bucket(k, 3) for k in "xyz"] == [8, 9, 10]
    assert bucket(17, 12) == 1   # 16 buckets up to 12 keys
    assert bucket(17, 13) == 17  # then 32
    h = java_hash("hello") & 0xFFFFFFFF
    assert bucket("hello", 1) == (h ^ (h >> 16)) & 15
