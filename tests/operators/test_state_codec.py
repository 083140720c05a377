"""The state value codec: compact JSON that round-trips what the engine keeps."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from operators.state import RocksNamespace, decode_key, decode_value, encode_key, encode_value


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


@pytest.mark.parametrize(("key", "encoded"), [
    (5, b"\x02\x80\x00\x00\x00\x00\x00\x00\x05"),
    (-1, b"\x02\x7f\xff\xff\xff\xff\xff\xff\xff"),
    (True, b"\x02\x80\x00\x00\x00\x00\x00\x00\x01"),   # a bool keys as its integer
    ("a\x00b", b"\x03a\x00\xffb\x00\x00"),
    (None, b"\x01"),
    (1.5, b"\x04\xbf\xf8\x00\x00\x00\x00\x00\x00"),
    (("s1", 7), b"\x03s1\x00\x00\x02\x80\x00\x00\x00\x00\x00\x00\x07"),
])
def test_key_bytes(key: Any, encoded: bytes) -> None:
    assert encode_key(key) == encoded
    assert decode_key(encoded) == key


@pytest.mark.parametrize("key", [
    (1795867788416, -1, 0, 12),            # an event time's held event
    (-(2 ** 63), 2 ** 63 - 1, 0, -1),      # the ends of the 64-bit range
    (True, 1, 2, 3), (1.5, 1, 2, 3), ("a", 1, 2, 3), (1, None, 2, 3),
])
def test_a_key_of_four_ints_is_its_parts_bytes(key: Any) -> None:
    """Four ints take a packed path: the bytes are those of the parts one by one."""
    assert encode_key(key) == b"".join(encode_key(p) for p in key)
    assert decode_key(encode_key(key)) == key


def test_a_four_int_key_beyond_64_bits_is_refused_as_a_part_is() -> None:
    with pytest.raises(OverflowError):
        encode_key((2 ** 63, 0, 0, 0))
    with pytest.raises(OverflowError):
        encode_key(2 ** 63)


def test_keys_sort_as_their_values() -> None:
    ints = [-(2 ** 63), -5, -1, 0, 1, 7, 2 ** 63 - 1]
    assert sorted(ints, key=encode_key) == ints
    texts = ["", "a", "a\x00", "ab", "b"]
    assert sorted(texts, key=encode_key) == texts
    assert sorted([("a", 2), ("a", 10), ("b", 1)], key=encode_key) == [
        ("a", 2), ("a", 10), ("b", 1)]


class _Db(dict):
    """A database recording writes (what ``RocksNamespace`` writes to)."""

    def delete(self, key: bytes) -> None:
        self[key] = None


class _Overlay(_Db):
    """A database taking objects, encoded later (the batch overlay's ``put_value``)."""

    def put_value(self, key: bytes, value: Any) -> None:
        self[key] = ("object", value)

    def put_new(self, key: bytes, value: Any) -> None:
        self[key] = ("new", value)


@pytest.mark.parametrize("db_type", [_Db, _Overlay])
@pytest.mark.parametrize("key", [0, 7, -3, 2 ** 62, "", "g", "a\x00b", "\x00tagged", "é",
                                 ("group", "k"), (1, "x"), None, 2.5, True])
def test_namespace_keys_are_encode_key(db_type: type, key: Any) -> None:
    """``RocksNamespace`` writes every key as ``encode_key`` spells it, whether put,
    deleted or written through a ``putter``, with the changelog sink seeing the same."""
    db = db_type()
    sunk: list[tuple[bytes, bytes | None]] = []
    sink = (lambda k, v: sunk.append((k, v))) if db_type is _Db else None
    ns = RocksNamespace(db, b"P", sink)
    want = b"P\x00K" + encode_key(key)
    ns.put(key, {"v": 1})
    assert list(db) == [want]
    ns.putter(key)({"v": 2})
    ns.delete(key)
    assert list(db) == [want] and db[want] is None
    if db_type is _Db:
        assert sunk == [(want, b'{"v":1}'), (want, b'{"v":2}'), (want, None)]


@pytest.mark.parametrize("key", [0, 7, -3, 2 ** 62, "g", ("group", "k")])
def test_a_new_key_is_written_as_encode_key_and_as_new_where_the_database_takes_it(
        key: Any) -> None:
    want = b"P\x00K" + encode_key(key)
    overlay = _Overlay()
    RocksNamespace(overlay, b"P", None).put_new(key, {"v": 1})
    assert overlay == {want: ("new", {"v": 1})}
    plain = _Db()
    sunk: list[tuple[bytes, bytes | None]] = []
    RocksNamespace(plain, b"P", lambda k, v: sunk.append((k, v))).put_new(key, {"v": 1})
    assert plain == {want: b'{"v":1}'} and sunk == [(want, b'{"v":1}')]


def test_non_finite_doubles_are_found_in_nested_state_and_bags() -> None:
    """Values whose JSON holds ``null`` are searched for NaN and infinities, in lists,
    tuples, dicts and bags (written as their list); anything else is what orjson wrote."""
    from operators.bags import ExtremeBag, SortedBag

    for value in ([[3, [1.5, 3]], {"a": math.inf}, 0, None], (None, [{"b": -math.inf}]),
                  [None, SortedBag([1.0, float("nan")])], [None, ExtremeBag([math.inf])],
                  # as many top-level Nones as some nulls, and one null more
                  [None, None, math.nan], {"a": None, "b": -math.inf}, [None, [None, math.inf]],
                  [[1, [math.nan, 1]], None, 7]):
        assert encode_value(value)[:1] == b" "
        assert repr(decode_value(encode_value(value))) == repr(
            json.loads(json.dumps(value, default=lambda b: b.plain())))
    for value in ([[3, [1.5, 3]], {"a": 2.0, "s": "inf"}, 0, None],
                  [None, SortedBag([1.0]), ExtremeBag([2.0, -1.0])],
                  [[1, [2.5, 1]], None, 7], [None, "null", [None]], [None, None]):
        assert encode_value(value)[:1] == b"["
