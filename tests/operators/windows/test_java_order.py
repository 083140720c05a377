"""Java hash codes and HashMap buckets and iteration order: the order Esper iterates a
``#unique`` window and the groups of one update of a grouped statement."""

from __future__ import annotations

import pytest

from operators.windows.java_order import (
    boxed_hash,
    bucket,
    hashmap_order,
    java_hash,
    multikey_hash,
)


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


@pytest.mark.parametrize(("value", "box", "code"), [
    (-3, "int", -3),                # Integer.hashCode: the value
    (-3, "long", 2),                # Long.hashCode
    (1 << 40, "long", 256),
    (2, "double", 1073741824),      # Double.hashCode of 2.0
    (1.5, "float", 1069547520),     # Float.floatToIntBits
    ("ab", "string", 3105),
    (None, "int", 0),
    (7, "", 7),                     # unknown type: the value decides
])
def test_boxed_hash(value: object, box: str, code: int) -> None:
    assert boxed_hash(value, box) == code


def test_multikey_hash_folds_with_31() -> None:
    assert multikey_hash(("a", -1), ("string", "int")) == 31 * 97 - 1
    assert multikey_hash(("a", -1), ("string", "long")) == 31 * 97
    assert multikey_hash(("a",), ("string",)) == 97


def test_hashmap_order_by_bucket_then_put_order() -> None:
    # 37 and 5 share bucket 5 of 16: put order decides between them
    assert hashmap_order([16, 5, 37, 2]) == ([0, 3, 1, 2], 16)
    assert hashmap_order([37, 5]) == ([0, 1], 16)


def test_hashmap_order_grows_past_three_quarters() -> None:
    order, cap = hashmap_order(list(range(12)) + [17])
    assert cap == 16 * 2 and order == list(range(13))   # 17 in bucket 17 of 32
    order, cap = hashmap_order([17, *range(12)])
    assert cap == 32 and order == [*range(1, 13), 0]


def test_hashmap_order_grows_at_a_ninth_key_in_a_bucket() -> None:
    codes = [16 * i for i in range(1, 10)]
    assert hashmap_order(codes[:8]) == (list(range(8)), 16)
    assert hashmap_order(codes) == ([1, 3, 5, 7, 0, 2, 4, 6, 8], 32)


def test_hashmap_order_keeps_a_grown_table() -> None:
    assert hashmap_order([17, 1]) == ([0, 1], 16)
    assert hashmap_order([17, 1], 32) == ([1, 0], 32)


def test_java_hash_of_a_map_and_of_other_values_is_deterministic() -> None:
    assert java_hash({"a": 1, "b": True}) == (97 ^ 1) + (98 ^ 1231)   # AbstractMap
    assert java_hash(range(2)) == java_hash("range(0, 2)")
