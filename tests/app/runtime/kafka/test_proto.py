"""The proto3 reader and the Protobuf wire format against the encoding guide's bytes,
and the output columns a select clause gives."""

from __future__ import annotations

import math
import random

import pytest

from app.runtime.kafka import proto
from app.runtime.kafka.output_columns import NotEvident, select_columns

TEST = proto.parse("""
syntax = "proto3";
package t;  /* a comment */
import "other.proto";
option java_package = "x";
message Test1 {
  int32 a = 1;
  optional string b = 2 [deprecated = true];
  reserved 9, 10;
  message Inner { sint64 x = 1; }
  Inner c = 3;
  repeated int32 d = 4;
  Kind k = 5;
  enum Kind { ZERO = 0; ONE = 1; }
  oneof pick { bool e = 6; float f = 7; }
}
message Other { string z = 1; }
""")


def _read(data: bytes, indexes: tuple[int, ...] = (0,)) -> dict[str, object]:
    return proto.reader(TEST, TEST.message_at(list(indexes)))(data, 0, len(data))


def test_the_encoding_guides_examples_read() -> None:
    assert _read(bytes.fromhex("089601")) == {"a": 150, "b": None, "c": None, "d": [],
                                              "k": 0, "e": False, "f": 0.0}
    assert _read(bytes.fromhex("120774657374696e67"))["b"] == "testing"
    assert _read(bytes.fromhex("1a03089601"))["c"] == {"x": 75}  # zigzag 150 is 75
    assert _read(bytes.fromhex("2206038e029ea705"))["d"] == [3, 270, 86942]  # packed
    assert _read(bytes.fromhex("08ffffffffffffffffff01"))["a"] == -1
    assert _read(bytes.fromhex("280130013d0000c03f"))["f"] == 1.5
    assert _read(bytes.fromhex("0a0178"), (1,)) == {"z": "x"}
    assert _read(bytes.fromhex("089601" + "4805" + "5203616263"))["a"] == 150  # unknown


def test_a_truncated_or_foreign_body_is_an_error() -> None:
    with pytest.raises(proto.ProtoError, match="runs past the record"):
        _read(bytes.fromhex("1207746573"))
    with pytest.raises(IndexError):
        _read(bytes.fromhex("0896"))
    with pytest.raises(proto.ProtoError, match="names no message"):
        TEST.message_at([2])


def test_message_indexes_are_zigzag_varints() -> None:
    assert proto.message_indexes(b"\x00", 0) == ([0], 1)
    assert proto.message_indexes(b"\x04\x02\x04", 0) == ([1, 2], 3)


def test_proto2_and_maps_are_refused() -> None:
    with pytest.raises(proto.ProtoError, match="only proto3"):
        proto.parse('syntax = "proto2"; message M { required int32 a = 1; }')
    with pytest.raises(proto.ProtoError, match="map fields are not read"):
        proto.parse('syntax = "proto3"; message M { map<string, int32> m = 1; }')


def test_the_writer_writes_what_the_reader_reads() -> None:
    cols = {"a": "string", "b": "double", "c": "long", "d": "boolean", "e": "int",
            "g": "float"}
    text = proto.render("o", cols)
    msg = proto.parse(text).messages[0]
    write, read = proto.writer(msg, "t"), proto.reader(proto.parse(text), msg)
    assert write({"c": 150}) == bytes.fromhex("189601")
    assert write({"a": "testing"}) == bytes.fromhex("0a0774657374696e67")
    rnd = random.Random(3)
    for _ in range(2000):
        row = {"a": rnd.choice([None, "x" * rnd.randrange(200), "é漢"]),
               "b": rnd.choice([None, rnd.random() * 1e9, math.nan, -math.inf, 3]),
               "c": rnd.choice([None, rnd.randrange(-(1 << 63), 1 << 63), 0, -1]),
               "d": rnd.choice([None, True, False]),
               "e": rnd.choice([None, rnd.randrange(-(1 << 31), 1 << 31)]),
               "g": rnd.choice([None, 1.5, -2])}
        data = write(row)
        back = read(data, 0, len(data))
        assert all(back[k] == v or (v != v and back[k] != back[k]) for k, v in row.items())
    with pytest.raises(ValueError, match=r"^t: column 'c' holds 'x', which its Protobuf "):
        write({"c": "x"})
    with pytest.raises(ValueError, match=r"^t: column 'e' holds 2147483648, "):
        write({"e": 1 << 31})


SCHEMAS = {"W": {"account": "string", "amount": "double", "n": "int", "ok": "boolean"},
           "V": {"id": "long"}}


def test_select_columns_follow_the_expressions_types() -> None:
    assert select_columns(
        "select irstream account, sum(amount) as total, count(*) as c, sum(n) as sn, "
        "avg(n) as a, max(n) as mx, amount * 2 as d, n + 1 as m, n / 2 as q, "
        "account || 'x' as s, amount > 1 as big, w.ok as ok, cast(n, string) as t "
        "from W#length(3) as w group by account", SCHEMAS) == {
        "account": "string", "total": "double", "c": "long", "sn": "long", "a": "double",
        "mx": "int", "d": "double", "m": "int", "q": "double", "s": "string",
        "big": "boolean", "ok": "boolean", "t": "string"}
    assert select_columns("select * from W", SCHEMAS) == SCHEMAS["W"]
    assert select_columns("select w.account as a, v.id as i from W#keepall as w, "
                          "V#keepall as v where w.n = v.id", SCHEMAS) == {
        "a": "string", "i": "long"}


def test_a_column_whose_type_is_not_evident_is_named() -> None:
    with pytest.raises(NotEvident, match="the type of column 'prev\\(1,amount\\)' is not "
                                         "evident"):
        select_columns("select prev(1, amount) from W#length(2)", SCHEMAS)
    with pytest.raises(NotEvident, match="reads more than event types"):
        select_columns("select * from X", SCHEMAS)
